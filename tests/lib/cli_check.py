"""tests/lib/cli_check.py: the Python half of the shell tests of the lowp command
(tests/lib/cli_test.sh is the shell half, and cli_test_py runs a script with this folder
on its path):

    import cli_check as cc
    lowp, tmp = cc.start("NAME")    argv[1] (the lowp command) and argv[2] (the test's
                                    fresh directory); NAME heads the summary
    cc.bad(msg) / cc.ok()           count a failure (printed "FAIL: ...") / a pass;
                                    bad returns None, so `return cc.bad(...)` ends a check
    cc.run(args)                    lowp ARGS (stdin /dev/null): the CompletedProcess, text
                                    with undecodable bytes replaced
    cc.refused(name, args, out, pat)   the README's bad-input rule: exit 2, exactly one
                                    stderr line, starting "lowp: " and containing pat,
                                    and neither `out` (None: no file) nor a temporary in
                                    tmp afterwards (out is removed first). One ok or bad.
    cc.end()                        "NAME: P passed, F failed", then exit 1 iff F > 0
"""
import os
import subprocess
import sys

_name, _lowp, _tmp = "", "", ""
_passes = _fails = 0


def start(name):
    global _name, _lowp, _tmp
    _name, _lowp, _tmp = name, sys.argv[1], sys.argv[2]
    return _lowp, _tmp


def bad(msg):
    global _fails
    _fails += 1
    print("FAIL: " + msg)
    sys.stdout.flush()


def ok():
    global _passes
    _passes += 1


def run(args):
    return subprocess.run([_lowp] + list(args), capture_output=True, text=True, errors="replace",
                          stdin=subprocess.DEVNULL)


def refused(name, args, out, pat):
    if out is not None and os.path.exists(out):
        os.remove(out)
    p = run(args)
    err = p.stderr.strip().splitlines()
    if p.returncode != 2:
        return bad(f"{name}: exit {p.returncode}, expected 2 ({err[:2]})")
    if len(err) != 1 or not err[0].startswith("lowp: ") or pat not in err[0]:
        return bad(f"{name}: stderr is not one 'lowp: ' line naming {pat!r}: {err[:3]}")
    if (out is not None and os.path.exists(out)) or [f for f in os.listdir(_tmp) if ".tmp" in f]:
        return bad(f"{name}: an output or temporary was left behind")
    ok()


def end():
    print(f"{_name}: {_passes} passed, {_fails} failed")
    sys.exit(1 if _fails else 0)
