#!/bin/sh
# tests/test_gpu_check_args.sh CVT KVWRITE DECODE MMA SELECT: the stand-alone GPU check programs
# take their numbers through the CLI's one parser (tools/cli_parse.h): a malformed or
# out-of-range number is refused with one line naming the option and exit status 2,
# before any GPU is looked for (so this runs on machines without one).
set -u
pass=0 fail=0
refuse() { # expect-substring program args...
  want=$1; shift
  out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 2 ] && printf '%s' "$out" | grep -q -- "$want"; then pass=$((pass + 1))
  else fail=$((fail + 1)); echo "FAIL: $* -> exit $rc: $out"; fi
}
tmp=${TMPDIR:-/tmp}/gpu_check_args.$$.md
refuse "--threads: 'abc' is not an integer" "$1" --threads abc "$tmp"
refuse "--threads: 0 is out of range" "$1" --threads 0 "$tmp"
refuse "--cases: '5x' is not an integer" "$2" --cases 5x "$tmp"
refuse "--seed: '1e5' is not an integer" "$2" --seed 1e5 "$tmp"
refuse "LOWP_SEED: '-1' is negative" env LOWP_SEED=-1 "$2" "$tmp"
refuse "--cases: '010x' is not an integer" "$3" "$tmp" --cases 010x
refuse "--seed: an empty string is not a number" "$3" "$tmp" --seed ""
refuse "--threads: 99999 is out of range" "$3" "$tmp" --threads 99999
refuse "LOWP_SEED: 'abc' is not an integer" env LOWP_SEED=abc "$4" "$tmp"
refuse "--cases: '5x' is not an integer" "$5" "$tmp" --cases 5x
refuse "--max-ctx: 8 is out of range" "$5" "$tmp" --max-ctx 8
refuse "--only: 'moba' is not qsa, dsa or sparse" "$5" "$tmp" --only moba
refuse "--threads: 0 is out of range" "$5" "$tmp" --threads 0
refuse "LOWP_SEED: 'x1' is not an integer" env LOWP_SEED=x1 "$5" "$tmp"
refuse "usage: lowp_gpu_select_check" "$5" --quick
rm -f "$tmp"
echo "test_gpu_check_args: $pass passed, $fail failed"
[ "$fail" = 0 ]
