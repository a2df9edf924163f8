#!/bin/sh
# tests/test_select_cli.sh LOWP PYTHON: `lowp select`'s contract.
#
#   - every selector runs on small inputs and writes what --help says: --indices int32
#     [q_len, units, topk], --scores float32 [q_len, units, candidates], QSA's --index-list
#     int32 [q_len, 4 * topk + 4] whose count column counts its valid slots; the reference
#     keys against themselves (--keys bf16) change no selection;
#   - the indices are the top-k of the scores under the tie rule (higher score, then
#     smaller index), recomputed here from the written scores;
#   - the known failure: NVFP4 main keys of a low-magnitude layer with the global scale
#     at 1.0 lose a needle block from MoBA's selection; the calibrated scale keeps it;
#   - bad input gets one "lowp: " line, exit 2 and no file: a budget that is not a multiple
#     of the ratio, a top-k larger than the blocks the keys make, index keys with more
#     than one head, query heads that are not a multiple of the KV heads, dims that
#     differ, unknown selectors and formats, --budget with --topk, a NaN score (QSA E4M3
#     index keys beyond 464 are NaN), non-finite inputs.
# Inputs are written by numpy in PYTHON; exit 77 (skip) without numpy.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_select_cli "$1"
cli_test_need_numpy "${2:-python3}"
cat > "$tmp/t.py" <<'EOF'
import os
import re
import numpy as np
import cli_check as cc
from cli_check import bad, ok

lowp, tmp = cc.start("test_select_cli")


def run(args):
    return cc.run(["select"] + args)


def f(name):
    return os.path.join(tmp, name)


r = np.random.default_rng(7)
np.save(f("q_idx.npy"), r.standard_normal((3, 4, 128)).astype(np.float32))
np.save(f("k_idx.npy"), r.standard_normal((300, 1, 128)).astype(np.float32))
np.save(f("q_main.npy"), r.standard_normal((2, 12, 64)).astype(np.float32))
np.save(f("k_main.npy"), r.standard_normal((200, 4, 64)).astype(np.float32))
np.save(f("k_two.npy"), r.standard_normal((300, 2, 128)).astype(np.float32))
np.save(f("k_dim.npy"), r.standard_normal((300, 1, 64)).astype(np.float32))
np.save(f("q_nan.npy"), np.full((1, 4, 128), np.nan, dtype=np.float32))
np.save(f("k_three.npy"), r.standard_normal((300, 3, 128)).astype(np.float32))
np.save(f("w_big.npy"), np.full(128, 999.0, dtype=np.float32))  # (1 + w) = 1000: normed keys near 1000

cases = [  # selector, q, k, extra, units, topk, candidates
    ("qsa", "q_idx", "k_idx", ["--keys", "nvfp4", "--topk", "16"], 1, 16, 75),
    ("qsa", "q_idx", "k_idx", ["--keys", "e4m3", "--budget", "64"], 1, 16, 75),
    ("dsa", "q_idx", "k_idx", ["--keys", "fp4-deepgemm", "--topk", "40"], 1, 40, 300),
    ("moba", "q_main", "k_main", ["--keys", "mxfp4", "--block", "16", "--topk", "3"], 12, 3, 13),
    ("nsa", "q_main", "k_main", ["--keys", "nvfp4", "--block", "16", "--topk", "5"], 4, 5, 13),
]
for sel, q, k, extra, units, K, C in cases:
    tag = f"{sel} {' '.join(extra)}"
    for out in ("i.npy", "s.npy", "l.npy"):
        if os.path.exists(f(out)):
            os.remove(f(out))
    args = ["--selector", sel, "--q", f(q + ".npy"), "--k", f(k + ".npy"), "--indices", f("i.npy"),
            "--scores", f("s.npy")] + extra + (["--index-list", f("l.npy")] if sel == "qsa" else [])
    p = run(args)
    if p.returncode != 0:
        bad(f"{tag}: exit {p.returncode}: {p.stderr.strip()}")
        continue
    idx, sc = np.load(f("i.npy")), np.load(f("s.npy"))
    qlen = np.load(f(q + ".npy")).shape[0]
    if idx.shape != (qlen, units, K) or idx.dtype != np.int32 or sc.shape != (qlen, units, C):
        bad(f"{tag}: shapes {idx.shape} {idx.dtype} {sc.shape}, expected ({qlen}, {units}, {K}) and ({qlen}, {units}, {C})")
        continue
    ok()
    # the indices are the scores' top-k under the tie rule
    good = True
    for i in range(qlen):
        for u in range(units):
            s = sc[i, u]
            vis = np.flatnonzero(s != -np.inf)
            order = vis[np.lexsort((vis, -s[vis].astype(np.float64)))][:K]
            want = np.full(K, -1, dtype=np.int32)
            want[:len(order)] = order
            if not np.array_equal(idx[i, u], want):
                good = False
    if good:
        ok()
    else:
        bad(f"{tag}: indices are not the top-{K} of the written scores")
    if sel == "qsa":
        lst = np.load(f("l.npy"))
        if lst.shape != (qlen, 4 * K + 4) or not all(lst[i, -1] == (lst[i, :-1] >= 0).sum() for i in range(qlen)):
            bad(f"{tag}: index list {lst.shape} or its count column is wrong")
        else:
            ok()
    # the reference keys against themselves: nothing changes
    p = run(["--selector", sel, "--q", f(q + ".npy"), "--k", f(k + ".npy"), "--keys", "bf16"] + extra[2:])
    if p.returncode != 0 or " unchanged " not in p.stdout or "jaccard mean 1.000000 min 1.000000" not in p.stdout:
        bad(f"{sel} bf16 against bf16: {p.stdout.strip()} {p.stderr.strip()}")
    elif not re.search(r"^certified stable \d+ of \d+ selections", p.stdout, re.M):
        bad(f"{sel} bf16 against bf16: no certified count: {p.stdout.strip()}")
    else:
        ok()

# the known failure (ref/notes/kernels.md 6, row 5: NVFP4 with the global scale left at 1.0 on a
# low-magnitude layer): keys near 1e-3 give block scales below E4M3's smallest subnormal,
# every key flushes to zero, and the needle block (20) leaves MoBA's top-4, which the
# calibrated global scale keeps
q = r.standard_normal((1, 1, 64)).astype(np.float32)
q /= np.linalg.norm(q)
k = (r.standard_normal((4096, 1, 64)) * 1e-3).astype(np.float32)
k[1280:1344, 0, :] += (4e-3 * q[0, 0]).astype(np.float32)
np.save(f("qn.npy"), q)
np.save(f("kn.npy"), k)
kept = {}
for scale in ("calibrated", "one"):
    p = run(["--selector", "moba", "--q", f("qn.npy"), "--k", f("kn.npy"), "--keys", "nvfp4", "--recipe", "sglang-kv",
             "--scale", scale, "--topk", "4", "--block", "64", "--indices", f("needle.npy")])
    kept[scale] = p.returncode == 0 and 20 in np.load(f("needle.npy"))[0, 0]
    if scale == "one" and "16384 of 16384 blocks have a zero scale" not in p.stdout:
        bad(f"needle, scale one: the zero block scales are not reported: {p.stdout.strip()}")
if kept == {"calibrated": True, "one": False}:
    ok()
else:
    bad(f"needle kept under calibrated / one: {kept}, expected True / False")

refusals = [
    (["--selector", "qsa", "--q", "q_idx", "--k", "k_idx", "--budget", "30"], "not a multiple of the ratio"),
    (["--selector", "qsa", "--q", "q_idx", "--k", "k_idx", "--topk", "76"], "top-76 of the 75 blocks"),
    (["--selector", "qsa", "--q", "q_idx", "--k", "k_idx", "--topk", "4", "--budget", "16"], "give one"),
    (["--selector", "qsa", "--q", "q_idx", "--k", "k_two"], "one head"),
    (["--selector", "dsa", "--q", "q_idx", "--k", "k_dim"], "dim"),
    (["--selector", "moba", "--q", "q_main", "--k", "k_main", "--topk", "3", "--block", "16", "--keys", "e5m2"], "keys 'e5m2'"),
    (["--selector", "nsa", "--q", "q_idx", "--k", "k_three", "--topk", "2"], "multiple"),
    (["--selector", "moba", "--q", "q_main", "--k", "k_main", "--topk", "99", "--block", "16"], "top-99"),
    (["--selector", "bsa", "--q", "q_idx", "--k", "k_idx"], "unknown selector"),
    (["--selector", "qsa", "--q", "q_idx", "--k", "k_idx", "--topk", "4", "--scale", "one"], "main keys"),
    (["--selector", "qsa", "--q", "q_nan", "--k", "k_idx", "--topk", "4"], "must be finite"),
    (["--selector", "qsa", "--q", "q_idx", "--k", "k_idx", "--keys", "e4m3", "--topk", "4", "--k-norm-weight",
      "w_big"], "NaN"),
    (["--selector", "dsa", "--q", "q_idx", "--k", "k_idx", "--topk", "4", "--weights", "q_idx"], "values, expected"),
]
for args, want in refusals:
    full = []
    for a in args:
        full.append(f(a + ".npy") if a in ("q_idx", "k_idx", "q_main", "k_main", "k_two", "k_three", "k_dim", "q_nan", "w_big") else a)
    cc.refused(" ".join(args), ["select"] + full + ["--indices", f("out.npy")], f("out.npy"), want)
# select-sweep: one small grid as CSV; rows for every key format, the needle columns filled
p = cc.run(["select-sweep", "--contexts", "4096", "--selectors", "qsa,nsa", "--workloads", "needle",
            "--q-len", "1", "--csv", f("sweep.csv")])
if p.returncode != 0:
    bad(f"select-sweep: exit {p.returncode}: {p.stderr.strip()}")
else:
    rows = [l.split(",") for l in open(f("sweep.csv")).read().splitlines()]
    head, body = rows[0], rows[1:]
    keys = sorted((r[0], r[3]) for r in body)
    want = sorted([("qsa", k) for k in ("e4m3", "nvfp4", "mxfp4", "mxfp8")] +
                  [("nsa", k) for k in ("fp8_e4m3 g=amax/448", "fp8_e4m3 g=1", "nvfp4 g=amax/2688", "nvfp4 g=1",
                                        "mxfp4", "mxfp8")])
    ni, ci = head.index("needles"), head.index("certified")
    if keys != want or any(int(r[ni]) != int(r[head.index("selections")]) for r in body):
        bad(f"select-sweep rows: {keys}")
    elif not all(r[ci].isdigit() for r in body):  # every selector has a score bound, nsa included
        bad(f"select-sweep: a certified column without a count: {[(r[0], r[3], r[ci]) for r in body]}")
    else:
        ok()
for args, want in ((["--selectors", "bsa"], "unknown selector"), (["--workloads", "x"], "unknown workload"),
                   (["--contexts", "10"], "--contexts")):
    p = cc.run(["select-sweep"] + args)
    if p.returncode != 2 or want not in p.stderr:
        bad(f"select-sweep {args}: exit {p.returncode} {p.stderr.strip()!r}")
    else:
        ok()
cc.end()
EOF
cli_test_py "$tmp/t.py" "$lowp" "$tmp"
