#!/usr/bin/env python3
"""tools/ci_tiers.py LOG BUILD_DIR OLD_REPORT > TABLE.md (the per-test table of reports/ci-tiers.md)

The per-test table of reports/ci-tiers.md from one `.ci/run` log: each test's seconds in
the main stage and in the ASan stage (the two `ctest` runs, in that order, in LOG), its
labels (from `ctest --show-only=json-v1` in BUILD_DIR) and its "what" (kept from
OLD_REPORT's table; tests new since then get an empty cell to fill). Sorted by the main
stage's time. Standard library only.
"""
import json
import re
import subprocess
import sys

RESULT = re.compile(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*+\w+|Passed|\w+)\s+([\d.]+) sec")


def stages(log):
    """[{test: (status, seconds)}] for each ctest run in the log."""
    out, cur = [], None
    for line in open(log, errors="replace"):
        if line.startswith("Test project "):
            cur = {}
            out.append(cur)
        m = RESULT.match(line)
        if m and cur is not None:
            cur[m.group(1)] = (m.group(2).strip("*"), float(m.group(3)))
    return out


def labels(build):
    j = json.loads(subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                                  capture_output=True, text=True, check=True).stdout)
    res = {}
    for t in j.get("tests", []):
        lab = []
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                lab = p.get("value", [])
        res[t["name"]] = ", ".join(lab)
    return res


def whats(old):
    res = {}
    for line in open(old):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0] not in ("test", "---"):
            res[cells[0]] = cells[4]
    return res


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    st = stages(sys.argv[1])
    main_s = st[0] if st else {}
    asan = st[1] if len(st) > 1 else {}
    lab, what = labels(sys.argv[2]), whats(sys.argv[3])
    print("| test | labels | seconds | ASan seconds | what |")
    print("|---|---|---:|---:|---|")
    for name, (status, sec) in sorted(main_s.items(), key=lambda kv: -kv[1][1]):
        a = asan.get(name)
        a_txt = "-" if a is None else ("%.2f" % a[1] if a[0] == "Passed" else a[0].lower())
        s_txt = "%.1f" % sec if status == "Passed" else "%s (%.1f)" % (status.lower(), sec)
        print("| %s | %s | %s | %s | %s |" % (name, lab.get(name, ""), s_txt, a_txt, what.get(name, "")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
