#!/bin/sh
# tests/test_quantlib.sh PYTHON: tools/quantlib_check.py --quick on CPU tensors: torchao,
# nvidia-modelopt and compressed-tensors against the lowp recipes named after them, byte for
# byte. Every named comparison must be equal, every library must have run, and the two
# comparisons against recipes not named after the library (ocp vs torchao FLOOR, rceil vs
# torchao RCEIL) must find their known differences: the check can see a difference.
# PYTHON is overridden by $LOWP_QUANTLIB_PYTHON (a venv with torch and the three libraries,
# e.g. one made by `python3 -m venv V && V/bin/pip install torch torchao nvidia-modelopt
# compressed-tensors`). Exit 77 when torch or one of the libraries is not installed.
py=${LOWP_QUANTLIB_PYTHON:-$1}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in
    ("numpy", "ml_dtypes", "torch", "torchao", "modelopt", "compressed_tensors")))' 2>/dev/null; then
  echo "test_quantlib: skipped: $py lacks numpy, ml_dtypes, torch or one of torchao, modelopt, compressed_tensors"
  exit 77
fi
"$py" "$root/tools/quantlib_check.py" --quick --out "$tmp/q.md" >"$tmp/log" 2>&1
rc=$?
if [ "$rc" = 77 ]; then
  echo "test_quantlib: skipped: $(grep -m1 'not installed\|skipped' "$tmp/log" "$tmp/q.md" 2>/dev/null)"
  exit 77
fi
fail=0
bad() { echo "test_quantlib: FAIL: $*"; fail=1; }
[ "$rc" = 0 ] || bad "exit $rc: $(grep -v Warning "$tmp/log" | tail -5)"
for lib in nvidia-modelopt torchao compressed-tensors; do
  grep -q "^| $lib | [0-9.]* | .* | equal |" "$tmp/q.md" || bad "no equal row for $lib"
done
n=$(grep -c '| equal |' "$tmp/q.md")
[ "$n" -ge 20 ] || bad "expected at least 20 equal rows (4 modelopt x NVFP4 g, 2 MX; 4 torchao NVFP4, 8 MX; 6 compressed-tensors), got $n"
grep -q 'DIFFERS\|ERROR' "$tmp/q.md" && bad "a named comparison differs: $(grep 'DIFFERS\|ERROR' "$tmp/q.md" | cut -c1-300)"
for alt in ocp rceil; do
  grep -Eq "^\| torchao \| .* \| $alt \| [0-9]+ \| [1-9][0-9]* \| differs" "$tmp/q.md" ||
    bad "the $alt row finds no difference (the comparison cannot see one)"
done
[ "$fail" = 0 ] && echo "test_quantlib: ok ($n equal comparisons)"
exit $fail
