#!/bin/sh
# tests/test_zoo.sh LOWP LOWP_ZOO [TABLE]: the bug zoo (tests/zoo/zoo.c). Writes every case,
# runs `lowp certify $(cat args)` in each, and checks: the control (00.clean) passes (exit 0),
# every bug case is flagged (exit 1: an element outside its bound or a NaN mismatch), its
# report holds the line `expect` names (a diagnosis, or the verdict), and it names the
# failing case (the worst element's sequence, head, dim and a `--seq B` reproducer).
# 12 of 12 bug cases must be flagged. With TABLE, writes the markdown table of
# reports/bug-zoo.md there (bug, source, mutant, certify's verdict and failing case, the
# owners' tolerance test on the zoo's inputs and on its own).
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start zoo "$1"
zoogen=$2
case $zoogen in /*) ;; *) zoogen=$PWD/$zoogen ;; esac
table=${3:-}
if ! "$zoogen" "$tmp/zoo" 2>"$tmp/gen.err"; then
  bad "lowp_zoo failed: $(cat "$tmp/gen.err")"
  cli_test_end
  exit 1
fi
meta() { grep "^$1	" "$2/meta" | cut -f 2; }
flagged=0 bugs=0
: >"$tmp/rows"
for d in "$tmp"/zoo/*/; do
  name=$(basename "$d")
  want=$(head -n 1 "$d/expect")
  line=$(sed -n 2p "$d/expect")
  # shellcheck disable=SC2046 # args holds one argument per line, none with spaces
  (cd "$d" && "$lowp" certify $(cat args) >"$tmp/out" 2>"$tmp/err")
  got=$?
  if [ "$got" = "$want" ]; then ok; else bad "$name: exit $got, expected $want: $(cat "$tmp/err")"; fi
  if grep -qF -e "$line" "$tmp/out"; then ok; else bad "$name: report lacks '$line'"; sed 's/^/  | /' "$tmp/out"; fi
  counts=$(sed -n 's/^# verdicts of \([0-9]*\) outputs: exact \([0-9]*\), within bound \([0-9]*\), outside bound \([0-9]*\), nan mismatch \([0-9]*\);.*/\1 outputs: \4 outside, \5 NaN mismatch/p' "$tmp/out")
  if [ "$want" = 0 ]; then
    row="| 0 | $(meta bug "$d") | - | $(meta mutant "$d") | pass ($counts) | - | $(meta tol_zoo "$d") | $(meta tol_owner "$d") |"
  else
    bugs=$((bugs + 1))
    # the failing case: the first worst element (after the header line) and the reproducer
    first=$(awk '/^batch +head +dim/ {getline; print "seq " $1 " head " $2 " dim " $3 " (len " $4 "): got " $5 ", exact " $6 ", " $9; exit}' "$tmp/out")
    repro=$(grep -c '^# reproduce the first: lowp .* --seq [0-9]*$' "$tmp/out")
    diag=$(sed -n 's/^# diagnosis: \([^(]*\) (.*/\1/p' "$tmp/out" | sed 's/ *$//')
    if [ "$got" = 1 ] && [ -n "$first" ] && [ "$repro" = 1 ]; then
      flagged=$((flagged + 1)); ok
    else
      bad "$name: not flagged with a named failing case (exit $got; first '$first'; reproducer lines $repro)"
    fi
    num=$(echo "${name%%.*}" | sed 's/^0//')
    row="| $num | $(meta bug "$d") | $(meta source "$d") | $(meta mutant "$d") | flagged: $counts${diag:+; diagnosis: $diag} | $first | $(meta tol_zoo "$d") | $(meta tol_owner "$d") |"
  fi
  echo "$row" >>"$tmp/rows"
  test_name=$(meta test "$d")
  grep -qF "$test_name" "$tmp/tests" 2>/dev/null || echo "$test_name" >>"$tmp/tests"
done
echo "zoo: $flagged of $bugs bug cases flagged"
[ "$bugs" = 12 ] && [ "$flagged" = 12 ] && ok || bad "$flagged of $bugs bug cases flagged, expected 12 of 12"
if [ -n "$table" ]; then
  {
    echo "| # | bug | source | mutant | lowp certify | failing case (first worst element) | tolerance test on the zoo's inputs | tolerance test on its own inputs |"
    echo "|---|---|---|---|---|---|---|---|"
    cat "$tmp/rows"
  } >"$table"
fi
cli_test_end
