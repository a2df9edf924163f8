#!/bin/sh
# tests/test_bench_plans.sh PYTHON: the device benches' shape plans, on any machine (--dry-run
# needs no torch and no GPU). --issue-grid of tools/sdpa_bench.py and tools/flashinfer_bench.py
# is issue #22's decode grid: every batch 1, 2, 4, .., 64 at 4K..128K, and batch 1-2 at 256K and
# 1M, 46 shapes (FlashInfer: each in BF16 and FP8); combined with --batch, --ctx or --quick it
# is refused with one line and exit 2.
py=${1:?usage: test_bench_plans.sh PYTHON}
tools=$(dirname "$0")/../tools
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "test_bench_plans: FAIL: $*"; fail=1; }

"$py" "$tools/sdpa_bench.py" --dry-run --issue-grid > "$tmp/sdpa" 2>&1 || bad "sdpa_bench --issue-grid rc=$?"
# plan rows: "batch ctx kv_MB sets rotation_MB"
awk '$1 ~ /^[0-9]+$/ {print $1 ":" $2}' "$tmp/sdpa" | sort -u > "$tmp/sdpa.shapes"
want=$(for b in 1 2 4 8 16 32 64; do for c in 4096 8192 16384 32768 65536 131072; do echo "$b:$c"; done; done
       for b in 1 2; do for c in 262144 1048576; do echo "$b:$c"; done; done)
echo "$want" | sort -u > "$tmp/want"
cmp -s "$tmp/sdpa.shapes" "$tmp/want" || { bad "sdpa_bench --issue-grid shapes differ:"; diff "$tmp/want" "$tmp/sdpa.shapes" | head -5; }
[ "$(wc -l < "$tmp/sdpa.shapes")" = 46 ] || bad "sdpa_bench --issue-grid: $(wc -l < "$tmp/sdpa.shapes") shapes, not 46"

"$py" "$tools/flashinfer_bench.py" --dry-run --issue-grid > "$tmp/fi" 2>&1 || bad "flashinfer_bench --issue-grid rc=$?"
# plan rows: "decode flashinfer-tc-fp8  B=1   L=4096 ..."
awk '$1 == "decode" {sub("B=", "", $3); sub("L=", "", $4); print $3 ":" $4 " " $2}' "$tmp/fi" | sort -u > "$tmp/fi.rows"
for k in bf16 fp8; do
  grep " flashinfer-tc-$k\$" "$tmp/fi.rows" | cut -d' ' -f1 | sort -u > "$tmp/fi.$k"
  cmp -s "$tmp/fi.$k" "$tmp/want" || bad "flashinfer_bench --issue-grid $k shapes differ from sdpa_bench's"
done

for t in sdpa_bench flashinfer_bench; do
  for extra in "--quick" "--batch 4" "--ctx 4096"; do
    # shellcheck disable=SC2086 # extra is a list of arguments
    "$py" "$tools/$t.py" --dry-run --issue-grid $extra > "$tmp/out" 2> "$tmp/err"
    rc=$?
    [ $rc = 2 ] || bad "$t --issue-grid $extra: rc $rc, not 2"
    grep -q -- "--issue-grid takes no" "$tmp/err" || bad "$t --issue-grid $extra: no reason on stderr"
    [ -s "$tmp/out" ] && bad "$t --issue-grid $extra: wrote to stdout"
  done
done
[ $fail = 0 ] && echo "test_bench_plans: passed (46 shapes in both benches, 6 refusals)"
exit $fail
