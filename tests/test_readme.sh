#!/bin/sh
# tests/test_readme.sh PYTHON BUILD: every output and figure README.md shows, rerun on this
# build by tools/readme_check.py (issue #18), so a change that alters a shown output fails.
# First the check is shown able to fail: a copy of README with one digit of the `lowp table`
# block changed must give exit 1 and a "differs" line for that block.
set -u
py=$1
build=$2
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -c 'import numpy' 2>/dev/null; then
  echo "test_readme: skipped: numpy not found for $py (the README's inputs are written with it)"
  exit 77
fi
sed 's/^0x1 0 0 1 0\.5 0x1p-1 subnormal$/0x1 0 0 1 0.5 0x1p-2 subnormal/' "$src/README.md" > "$tmp/README.md"
if cmp -s "$src/README.md" "$tmp/README.md"; then
  echo "FAIL: the lowp table e2m1 line to change is not in README.md"
  exit 1
fi
"$py" "$src/tools/readme_check.py" --build "$build" --readme "$tmp/README.md" --only 'lowp table' > "$tmp/out" 2>&1
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q 'differs  lowp table e2m1' "$tmp/out"; then
  echo "FAIL: a changed digit in the lowp table block gave exit $rc:"
  cat "$tmp/out"
  exit 1
fi
start=$(date +%s)
"$py" "$src/tools/readme_check.py" --build "$build"
rc=$?
echo "test_readme: the README check took $(( $(date +%s) - start )) s"
exit "$rc"
