#!/bin/sh
# tests/test_select_real.sh LOWP PYTHON [model]: `lowp select-sweep --keys-from DIR`, the
# selection drift of real keys (issue #19 item 7), on tiny exports.
#
#   - without "model": an export written by numpy in `lowp model export`'s layout
#     (DIR/blk.L.{q,k,v}.npy, q [T, 9, 64], k and v [T, 3, 64]: SmolLM2-135M's heads), three
#     layers, the last one's keys scaled by 2^-14 (a low-magnitude layer). The CSV has the
#     synthetic sweep's columns, one row per (layer, context, selector, key format) with
#     workload blk.L, q_len x units selections (MoBA: per query head, NSA: per KV head), a
#     context whose blocks the top-k covers skipped; the small layer's NVFP4 keys at global
#     scale 1.0 get zero block scales (E4M3 flushes them) and the calibrated scale none; a
#     row equals `lowp select` run on the slices numpy cuts (keys of the first ctx tokens,
#     the queries of the last q_len positions), so the sweep reads the rows it says it reads.
#     Bad input: one "lowp: " line, exit 2, no CSV: a missing directory, a truncated file,
#     k and v that differ, a q of another dim, query heads not a multiple of the KV heads,
#     a context longer than the export, qsa / dsa (no index keys in the model), --workloads
#     with --keys-from, --layers without it.
#   - with "model": the real file (exit 77 without it, as `lowp model` finds it): the first
#     2,000 bytes of README.md exported, its first 3 layers swept with small blocks, every row well formed.
# Exit 77 (skip) without numpy.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_select_real "$1"
cli_test_need_numpy "${2:-python3}"
mode=${3:-synthetic}
if [ "$mode" = model ]; then
  if ! "$lowp" model info > /dev/null 2>&1; then
    echo "test_select_real: skipped: no model file (tools/setup.sh installs it)"
    exit 77
  fi
  # the text: the first 2,000 bytes of the tree's README (some 450 tokens)
  head -c 2000 "$(dirname "$0")/../README.md" > "$tmp/text.txt"
  OMP_WAIT_POLICY=passive "$lowp" model export --threads 1 --out "$tmp/exp" "$tmp/text.txt" > /dev/null || {
    echo "FAIL: model export"; exit 1; }
fi
cat > "$tmp/t.py" <<'EOF2'
import os
import sys
import numpy as np
import cli_check as cc
from cli_check import bad, ok

lowp, tmp = cc.start("test_select_real")
mode = sys.argv[3]
f = lambda n: os.path.join(tmp, n)
HEAD = ("selector,workload,ctx,keys,selections,unchanged,jaccard_mean,jaccard_min,recall_mean,lost,deepest,"
        "needle_kept,needle_kept_ref,needles,zero_scales,blocks,seconds,certified,values,err_sel,err_val,err_both,"
        "sel_share").split(",")
FORMATS = ["fp8_e4m3 g=amax/448", "fp8_e4m3 g=1", "nvfp4 g=amax/2688", "nvfp4 g=1", "mxfp4", "mxfp8"]


def write_layer(d, layer, q, k, v):
    os.makedirs(d, exist_ok=True)
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(os.path.join(d, f"blk.{layer}.{name}.npy"), x.astype(np.float32))


def sweep_rows(args, csv):
    p = cc.run(["select-sweep"] + args + ["--csv", csv])
    if p.returncode != 0:
        return bad(f"select-sweep {args}: exit {p.returncode}: {p.stderr.strip()}")
    lines = open(csv).read().splitlines()
    if lines[0].split(",") != HEAD:
        return bad(f"CSV header {lines[0]!r}")
    return [dict(zip(HEAD, l.split(","))) for l in lines[1:]], p.stdout


def well_formed(rows, want):
    """every row's columns in range; the (workload, ctx, selector, keys) set is want"""
    got = sorted((r["workload"], int(r["ctx"]), r["selector"], r["keys"]) for r in rows)
    if got != sorted(want):
        return bad(f"rows {got[:4]}... ({len(got)}), expected {sorted(want)[:4]}... ({len(want)})")
    for r in rows:
        j, jm, rc = float(r["jaccard_mean"]), float(r["jaccard_min"]), float(r["recall_mean"])
        errs = [float(r[c]) for c in ("err_sel", "err_val", "err_both", "sel_share")]
        if not (0 <= jm <= j <= 1 and 0 <= rc <= 1 and all(np.isfinite(e) and e >= 0 for e in errs)
                and int(r["unchanged"]) <= int(r["selections"]) and r["needles"] == "0"
                and r["certified"].isdigit()):
            return bad(f"row out of range: {r}")
    ok()


if mode == "model":
    d = f("exp")
    res = sweep_rows(["--keys-from", d, "--layers", "0,1,2", "--contexts", "256", "--q-len", "8",
                      "--moba-block", "32", "--nsa-block", "8"], f("real.csv"))
    if res:
        rows, out = res
        well_formed(rows, [(f"blk.{l}", 256, s, k) for l in range(3) for s in ("moba", "nsa") for k in FORMATS])
        if "blk.0: " not in out or "K amax" not in out:
            bad(f"the table does not give the layer's key magnitude: {out[:300]!r}")
        else:
            ok()
    cc.end()

# ---- a numpy export in `lowp model export`'s layout ----
rng = np.random.default_rng(0x6c6f7770)
T, HQ, HK, D = 320, 9, 3, 64
d = f("exp")
layers = []
for layer in range(3):
    q = rng.standard_normal((T, HQ, D))
    k = rng.standard_normal((T, HK, D)) + 0.5 * rng.standard_normal((1, HK, D))  # a per-head mean: block means differ
    v = rng.standard_normal((T, HK, D))
    if layer == 2:
        k *= 2.0 ** -14
    write_layer(d, layer, q, k, v)
    layers.append((q, k, v))
args = ["--keys-from", d, "--contexts", "160,320", "--q-len", "8", "--moba-block", "32", "--nsa-block", "16"]
res = sweep_rows(args, f("real.csv"))
if res:
    rows, out = res
    # 160 tokens: NSA's 10 blocks are under its top-16 (dense, skipped); MoBA's 5 are not
    want = [(f"blk.{l}", c, s, k) for l in range(3) for c in (160, 320) for s in ("moba", "nsa") for k in FORMATS
            if not (s == "nsa" and c == 160)]
    well_formed(rows, want)
    if "# nsa at 160 tokens: top-16 of 10 candidates selects them all (dense); skipped" not in out:
        bad("the dense NSA context is not reported as skipped")
    else:
        ok()
    sel = {(r["workload"], int(r["ctx"]), r["selector"], r["keys"]): r for r in rows}
    if any(int(sel[(f"blk.0", 320, s, k)]["selections"]) != 8 * u for s, u in (("moba", HQ), ("nsa", HK))
           for k in FORMATS):
        bad("selections are not q_len x units (MoBA 9 query heads, NSA 3 KV heads)")
    else:
        ok()
    # the low-magnitude layer: NVFP4 at global scale 1.0 flushes block scales, the calibrated one does not
    z1 = int(sel[("blk.2", 320, "moba", "nvfp4 g=1")]["zero_scales"])
    zc = int(sel[("blk.2", 320, "moba", "nvfp4 g=amax/2688")]["zero_scales"])
    z0 = int(sel[("blk.0", 320, "moba", "nvfp4 g=1")]["zero_scales"])
    if not (z1 > 0 and zc == 0 and z0 == 0):
        bad(f"zero block scales: small layer g=1 {z1}, calibrated {zc}, normal layer g=1 {z0}")
    else:
        ok()
    # the same case through `lowp select` on numpy's slices: the same drift and error split
    q, k, v = layers[1]
    np.save(f("q.npy"), q[320 - 8:320].astype(np.float32))
    np.save(f("k.npy"), k[:320].astype(np.float32))
    np.save(f("v.npy"), v[:320].astype(np.float32))
    for s, block, keys, extra in (("moba", "32", "nvfp4 g=1", ["--keys", "nvfp4", "--recipe", "sglang-kv", "--scale", "one"]),
                                  ("nsa", "16", "mxfp4", ["--keys", "mxfp4"])):
        p = cc.run(["select", "--selector", s, "--block", block, "--q", f("q.npy"), "--k", f("k.npy"),
                    "--v", f("v.npy")] + extra)
        r = sel[("blk.1", 320, s, keys)]
        words = p.stdout.split()
        try:
            jm = float(words[words.index("jaccard") + 2])
            es = float(words[words.index("changed") + 1].rstrip(","))
            ev = float(words[words.index("values") + 2].rstrip(","))
        except (ValueError, IndexError):
            bad(f"select {s}: unexpected output {p.stdout!r} {p.stderr!r}")
            continue
        if (abs(jm - float(r["jaccard_mean"])) > 1e-6 or abs(es - float(r["err_sel"])) > 1e-5 * es
                or abs(ev - float(r["err_val"])) > 1e-5 * ev or int(words[words.index("unchanged") + 1]) != int(r["unchanged"])):
            bad(f"{s} {keys}: select {jm} {es} {ev}, sweep {r['jaccard_mean']} {r['err_sel']} {r['err_val']}")
        else:
            ok()

# ---- bad input: one line, exit 2, no CSV ----
out = f("bad.csv")
base = ["select-sweep", "--contexts", "320", "--q-len", "4", "--moba-block", "32", "--csv", out]
cc.refused("missing dir", base + ["--keys-from", f("nowhere")], out, "no blk.0.k.npy")
q, k, v = layers[0]
write_layer(f("trunc"), 0, q, k, v)
with open(f("trunc/blk.0.v.npy"), "r+b") as fh:
    fh.truncate(1000)
cc.refused("truncated file", base + ["--keys-from", f("trunc")], out, "blk.0.v.npy")
write_layer(f("kv"), 0, q, k, v[:, :2])
cc.refused("k and v differ", base + ["--keys-from", f("kv")], out, "k and v must match")
write_layer(f("dim"), 0, q[:, :, :32], k, v)
cc.refused("q dim", base + ["--keys-from", f("dim")], out, "the same tokens and dim")
write_layer(f("gqa"), 0, q[:, :8], k, v)
cc.refused("gqa", base + ["--keys-from", f("gqa")], out, "query heads a multiple of the KV heads")
cc.refused("too long", base[:1] + ["--contexts", "640"] + base[3:] + ["--keys-from", d], out, "has only 320 tokens")
cc.refused("qsa", base + ["--keys-from", d, "--selectors", "moba,qsa"], out, "index-key cache")
cc.refused("dsa", base + ["--keys-from", d, "--selectors", "dsa"], out, "dsa")
cc.refused("workloads", base + ["--keys-from", d, "--workloads", "needle"], out, "--workloads")
cc.refused("layers alone", base + ["--layers", "0"], out, "--layers needs --keys-from")
cc.refused("missing layer", base + ["--keys-from", d, "--layers", "0,7"], out, "blk.7.q.npy")
cc.end()
EOF2
cli_test_py "$tmp/t.py" "$lowp" "$tmp" "$mode"
