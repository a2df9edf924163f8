#!/bin/sh
# tests/test_zoo_certify_h200.sh PYTHON LOWP LIBLOWP: the CPU parts of tools/certify_h200.py
# (the H200 certificate script), so that it runs the first time on the device: lowp's
# emulator as the fake kernel (FP8 and BF16 caches) must be certified within bound, a broken
# fake (v_scale ignored) must fail with its reproducer printed and the diagnosis named, and a
# kernel whose import fails (torch SDPA where torch is missing, or FlashInfer) is reported
# while the others still run. Exit 77 without numpy.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start certify_h200 "$2"
cli_test_need_numpy "$1"
root=$(cd "$(dirname "$0")/.." && pwd)
LOWP_LIBRARY=$3 "$python" "$root/tools/certify_h200.py" --out "$tmp/o" --lowp "$lowp" --quick \
  --kernels emulator,emulator-bf16,flashinfer-fp8 >"$tmp/log" 2>&1
rc=$?
md=$tmp/o/certify-h200.md
[ "$rc" = 0 ] && ok || bad "clean run: exit $rc: $(tail -5 "$tmp/log")"
n=$(grep -c '^| [0-9] | .* | ok |$' "$md" 2>/dev/null)
[ "$n" = 4 ] && ok || bad "expected 4 certified cases (2 shapes x 2 emulator kernels), got $n: $(cat "$md")"
grep -q 'Totals: exact [0-9]*, within [0-9]*, outside 0, nan mismatch 0' "$md" && ok || bad "totals: $(grep Totals "$md")"
if "$python" -c 'import flashinfer' 2>/dev/null; then ok
else grep -q '^Not certified: unavailable: ' "$md" && ok || bad "flashinfer's import failure not reported"; fi
LOWP_LIBRARY=$3 "$python" "$root/tools/certify_h200.py" --out "$tmp/b" --lowp "$lowp" --quick \
  --kernels emulator-v-scale-ignored --case 1 >"$tmp/log" 2>&1
rc=$?
[ "$rc" = 1 ] && ok || bad "broken kernel: exit $rc, expected 1: $(tail -5 "$tmp/log")"
grep -q 'Reproduce: `python3 tools/certify_h200.py --out OUT --kernels emulator-v-scale-ignored --case 1' \
  "$tmp/b/certify-h200.md" && ok || bad "no reproducer: $(cat "$tmp/b/certify-h200.md")"
grep -q 'ignore v_scale' "$tmp/b/certify-h200.md" && ok || bad "diagnosis not named"
"$python" "$root/tools/certify_h200.py" --out "$tmp/x" --kernels nosuch >/dev/null 2>&1
[ $? = 2 ] && ok || bad "an unknown kernel is not exit 2"
cli_test_end
