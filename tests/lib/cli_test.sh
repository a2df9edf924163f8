# tests/lib/cli_test.sh: what the shell tests of the lowp command share. Sourced (POSIX sh):
#
#   . "$(dirname "$0")/lib/cli_test.sh"
#   cli_test_start NAME LOWP          lowp=LOWP (made absolute), tmp=a fresh directory
#                                     removed on exit, pass=0 fail=0; NAME heads the summary;
#                                     cli_test_lib=this folder (perl -I for npy.pl)
#   cli_test_need_numpy PYTHON        python=PYTHON; exit 77 (skip) when it lacks numpy
#   cli_test_py SCRIPT ARGS...        $python SCRIPT ARGS with this folder on its module path
#                                     (cli_check.py: the Python half's tally and checks)
#   ok / bad MESSAGE...               count a pass / a failure (the latter printed "FAIL: ...")
#   hexof FILE                        the bytes of FILE as one hex string
#   expect_error NAME CMD...          CMD (stdin /dev/null) must exit 2 with exactly one
#                                     "lowp: " line on stderr (kept in $tmp/err); when
#                                     cli_no_output names a file prefix, nothing in $tmp may
#                                     start with it afterwards (such files are removed first).
#                                     One ok, or one bad and status 1.
#   expect_error_naming NAME PAT CMD...  the same, and the line must match PAT (grep -e)
#   expect_reason NAME WORD           the last refused command's line contains WORD
#   cli_test_end                      "NAME: P passed, F failed"; status 0 iff F = 0 (the
#                                     script's last command, so its exit status)
#
# The README's "Bad input" rule is what expect_error checks: exit 2, one line, no output.
set -u

cli_test_start() {
  cli_test_name=$1
  lowp=$2
  cli_test_lib=$(cd "$(dirname "$0")/lib" && pwd)
  case $lowp in /*) ;; *) lowp=$PWD/$lowp ;; esac
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  pass=0
  fail=0
  cli_no_output=''
}

cli_test_need_numpy() {
  python=$1
  if ! "$python" -c 'import numpy' 2>/dev/null; then
    echo "$cli_test_name: skipped: numpy not found for $python"
    exit 77
  fi
}

cli_test_py() {
  PYTHONPATH="$cli_test_lib${PYTHONPATH:+:$PYTHONPATH}" "$python" "$@"
}

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
hexof() { od -An -v -tx1 "$1" | tr -d ' \n'; }

# The checks of expect_error, counting nothing: status 0 when they hold, else a bad and 1.
cli_refused() {
  cli_what=$1; shift
  if [ -n "$cli_no_output" ]; then rm -f "$tmp/$cli_no_output"*; fi
  "$@" > "$tmp/stdout" 2> "$tmp/err" < /dev/null
  cli_rc=$?
  if [ "$cli_rc" -ne 2 ]; then bad "$cli_what: exit $cli_rc, expected 2 ($(head -c 200 "$tmp/err"))"; return 1; fi
  if [ "$(wc -l < "$tmp/err")" -ne 1 ] || ! grep -q '^lowp: ' "$tmp/err"; then
    bad "$cli_what: stderr not one 'lowp:' line: $(cat "$tmp/err")"; return 1
  fi
  if [ -n "$cli_no_output" ] && ls "$tmp" | grep -q "^$cli_no_output"; then
    bad "$cli_what: output file left behind"; return 1
  fi
  return 0
}

expect_error() { # NAME CMD...
  cli_refused "$@" || return 1
  ok
}

expect_error_naming() { # NAME PATTERN CMD...
  cli_name=$1 cli_pat=$2; shift 2
  cli_refused "$cli_name" "$@" || return 1
  if ! grep -q -e "$cli_pat" "$tmp/err"; then bad "$cli_name: message does not name '$cli_pat': $(cat "$tmp/err")"; return 1; fi
  ok
}

expect_reason() { # NAME WORD
  grep -q -- "$2" "$tmp/err" && ok || bad "$1: the line does not say '$2': $(cat "$tmp/err")"
}

cli_test_end() {
  echo "$cli_test_name: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
