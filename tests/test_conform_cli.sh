#!/bin/sh
# tests/test_conform_cli.sh LOWP: how `lowp conform` reads its helper programs, and what it
# writes.
#
# The helpers are replaced by stand-ins (LOWP_PYTHON for tests/interop_mldtypes.py's
# interpreter, LOWP_GPU_CVT_CHECK for gpu/lowp_gpu_cvt_check) so that every outcome can be
# produced on any machine; --only runs just that oracle.
#   - ml_dtypes: a helper that fails to set up (an import error on stderr and exit 1; or
#     "cannot load" the library, which it follows with "0 passed, 1 failed") is reported as
#     a skip with its reason, never as a mismatch (exit 0); a real comparison failure is a
#     mismatch (exit 1); a pass is a pass;
#   - gpu: --report D/x.md writes D/x.md and nothing else in D, with the GPU check's report
#     as its last section; --no-report writes nothing, in the temporary folder either;
#   - --only with an empty or unknown oracle: exit 2, one "lowp: " line.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_conform_cli "$1" # lowp made absolute: the stand-ins run from other folders

# conform_rc NAME WANT_RC ARGS...: run lowp conform, stdout in $tmp/NAME.out
conform_rc() {
  name=$1 want=$2; shift 2
  "$lowp" conform "$@" > "$tmp/$name.out" 2> "$tmp/$name.err"
  rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else bad "$name: exit $rc, expected $want ($(tail -n 3 "$tmp/$name.out" "$tmp/$name.err" | tr '\n' ' '))"; fi
}
has() { if grep -q -e "$3" "$tmp/$2.out"; then ok; else bad "$1: stdout lacks '$3': $(tail -n 4 "$tmp/$2.out" | tr '\n' ' ')"; fi; }
hasnt() { if grep -q -e "$3" "$tmp/$2.out"; then bad "$1: stdout has '$3'"; else ok; fi; }

# ---- ml_dtypes: setup failures are skips with a reason, mismatches are mismatches --------
mkdir "$tmp/bin" "$tmp/tmpdir"
cat > "$tmp/bin/py_import" <<'EOF'
#!/bin/sh
echo "ImportError: ASan runtime does not come first in initial library list" >&2
exit 1
EOF
cat > "$tmp/bin/py_load" <<'EOF'
#!/bin/sh
echo "interop_mldtypes: cannot load liblowp.so: undefined symbol: __asan_report_load8"
echo "interop_mldtypes: 0 passed, 1 failed"
exit 1
EOF
cat > "$tmp/bin/py_mismatch" <<'EOF'
#!/bin/sh
echo "e4m3 ml_dtypes rn: input 0x7fc00000 (nan) got 0xff expected 0x7f"
echo "interop_mldtypes: 30 passed, 1 failed"
exit 1
EOF
cat > "$tmp/bin/py_pass" <<'EOF'
#!/bin/sh
echo "interop_mldtypes: 31 passed, 0 failed"
exit 0
EOF
chmod +x "$tmp/bin/"*
for c in import load; do
  LOWP_PYTHON="$tmp/bin/py_$c" conform_rc "ml_$c" 0 --only ml_dtypes --no-report
  has "setup failure ($c) is a skip" "ml_$c" '^skipped: .*\[ml_dtypes\]: setup failed'
  hasnt "setup failure ($c) is no mismatch" "ml_$c" 'mismatches'
  has "setup failure ($c): 0 failed" "ml_$c" '^conform: 0 passed, 0 failed, 1 skipped'
done
has "import failure names its reason" ml_import 'ASan runtime does not come first'
has "load failure names its reason" ml_load 'cannot load liblowp.so'
LOWP_PYTHON="$tmp/bin/py_mismatch" conform_rc ml_mismatch 1 --only ml_dtypes --no-report
has "a real mismatch is one" ml_mismatch '^FAILED: .*\[ml_dtypes\].*: 1 mismatches'
LOWP_PYTHON="$tmp/bin/py_pass" conform_rc ml_pass 0 --only ml_dtypes --no-report
has "a pass is one" ml_pass '^conform: 1 passed, 0 failed, 0 skipped'

# ---- gpu: exactly the report asked for ----------------------------------------------------
cat > "$tmp/bin/cvt" <<'EOF'
#!/bin/sh
# a stand-in for lowp_gpu_cvt_check REPORT: writes its report, says so, exits 77 (no GPU)
printf '# stand-in GPU cvt report\n\nno GPU here\n' > "$1"
echo "lowp_gpu_cvt_check: skipped (exit 77): no GPU"
exit 77
EOF
chmod +x "$tmp/bin/cvt"
mkdir "$tmp/rep"
TMPDIR="$tmp/tmpdir" LOWP_GPU_CVT_CHECK="$tmp/bin/cvt" conform_rc gpu_rep 0 --only gpu --report "$tmp/rep/x.md"
[ "$(ls "$tmp/rep")" = "x.md" ] && ok || bad "--report rep/x.md left: $(ls "$tmp/rep" | tr '\n' ' ')"
grep -q '^# stand-in GPU cvt report' "$tmp/rep/x.md" 2>/dev/null && ok || bad "the GPU check's report is not in x.md"
[ -z "$(ls -A "$tmp/tmpdir")" ] && ok || bad "temporary folder not empty: $(ls -A "$tmp/tmpdir" | tr '\n' ' ')"
mkdir "$tmp/cwd"
(cd "$tmp/cwd" && TMPDIR="$tmp/tmpdir" LOWP_GPU_CVT_CHECK="$tmp/bin/cvt" "$lowp" conform --only gpu --no-report > "$tmp/gpu_norep.out" 2>&1) && ok ||
  bad "--no-report: exit $?"
[ -z "$(ls -A "$tmp/cwd")" ] && ok || bad "--no-report wrote in the working folder: $(ls -A "$tmp/cwd" | tr '\n' ' ')"
[ -z "$(ls -A "$tmp/tmpdir")" ] && ok || bad "--no-report left in the temporary folder: $(ls -A "$tmp/tmpdir" | tr '\n' ' ')"

# ---- --only ------------------------------------------------------------------------------
for v in '' nope 'mpfr,'; do
  "$lowp" conform --only "$v" --no-report > "$tmp/only.out" 2> "$tmp/only.err"
  rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l < "$tmp/only.err")" -eq 1 ] && grep -q '^lowp: .*--only' "$tmp/only.err"; then ok
  else bad "--only '$v': exit $rc, stderr $(cat "$tmp/only.err")"; fi
done

cli_test_end
