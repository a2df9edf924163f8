#!/usr/bin/env python3
"""tools/plot_model_kv.py: the plots of reports/model-kv.md from `lowp model eval`'s CSVs.

    .venv/bin/python tools/plot_model_kv.py --layers reports/model-kv-layers.csv --out reports

writes model-kv-layers.png: per layer, the relative RMS error of K, V (the worst of the KV
heads) and of the layer's attention output (the worst of the query heads), one line per
format; and the K and V amax per layer (of the reference values the first format's rows
saw) on a log axis.

    .venv/bin/python tools/plot_model_kv.py --export DIR [--layers CSV]

prints, per layer, from `lowp model export`'s DIR/blk.L.{q,k,v}.npy: K and V amax, the
outlier-channel ratio (largest per-channel RMS over the median one, channels = the 3 x 64
(head, dim) columns), and the spread of the attention logits (the standard deviation of
q.k / sqrt(64) over causal pairs of every 8th query and key, query head h with KV head h / 3);
with --layers also the attention-output error of each format beside them. Needs matplotlib (exit 77 without it)."""
import argparse
import csv
import sys
from collections import defaultdict


def read_layers(path):
    err = defaultdict(lambda: defaultdict(list))  # (format, what) -> layer -> [(rel, n)]
    amax = defaultdict(lambda: defaultdict(float))  # (format, what) -> layer -> max amax
    order = []
    with open(path) as f:
        for r in csv.DictReader(f):
            key = (r["format"], r["what"])
            if r["format"] not in order:
                order.append(r["format"])
            layer = int(r["layer"])
            err[key][layer].append((float(r["rel_rms"]), int(r["elements"])))
            amax[key][layer] = max(amax[key][layer], float(r["amax"]))
    return err, amax, order


def analyse_export(a):
    try:
        import numpy as np
    except ImportError:
        print("plot_model_kv: numpy is missing", file=sys.stderr)
        return 77
    err, _, order = read_layers(a.layers) if a.layers else ({}, {}, [])
    show = [fm for fm in order if fm in ("fp8_e4m3:tensor", "nvfp4:1.0", "mxfp4", "mxfp8")]
    print("layer  K_amax  V_amax  K_outlier  V_outlier  logit_std" + "".join("  attn_%s" % fm for fm in show))
    layer = 0
    while True:
        try:
            q = np.load("%s/blk.%d.q.npy" % (a.export, layer))
            k = np.load("%s/blk.%d.k.npy" % (a.export, layer))
            v = np.load("%s/blk.%d.v.npy" % (a.export, layer))
        except FileNotFoundError:
            break
        T, H, D = k.shape

        def outlier(x):
            rms = np.sqrt((x.reshape(T, -1).astype(np.float64) ** 2).mean(axis=0))
            return rms.max() / np.median(rms)

        qs, ks = q[::8].astype(np.float64), k[::8].astype(np.float64)
        logits = []
        for h in range(q.shape[1]):
            s = qs[:, h, :] @ ks[:, h // (q.shape[1] // H), :].T / np.sqrt(D)
            logits.append(s[np.tril_indices(s.shape[0])])
        line = "%5d  %6.2f  %6.2f  %9.2f  %9.2f  %9.2f" % (layer, np.abs(k).max(), np.abs(v).max(), outlier(k),
                                                          outlier(v), np.concatenate(logits).std())
        for fm in show:
            line += "  %*.4f" % (len(fm) + 5, max(r for r, _ in err[(fm, "attn")][layer]))
        print(line)
        layer += 1
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers")
    ap.add_argument("--out")
    ap.add_argument("--export")
    a = ap.parse_args()
    if a.export:
        return analyse_export(a)
    if not a.layers or not a.out:
        ap.error("give --layers CSV and --out DIR (plots) or --export DIR (the per-layer table)")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_model_kv: matplotlib is missing", file=sys.stderr)
        return 77
    err, amax, formats = read_layers(a.layers)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    for ax, what in zip(axes.flat[:3], ("k", "v", "attn")):
        for fm in formats:
            layers = sorted(err[(fm, what)])
            ys = [max(r for r, _ in err[(fm, what)][l]) for l in layers]
            ax.plot(layers, ys, marker=".", label=fm)
        ax.set_yscale("log")
        ax.set_xlabel("layer")
        ax.set_ylabel("relative RMS error, worst head")
        ax.set_title({"k": "K (after RoPE)", "v": "V", "attn": "attention output (this layer's own)"}[what])
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    ax = axes.flat[3]
    ref = formats[0]
    for what, style in (("k", "-"), ("v", "--")):
        layers = sorted(amax[(ref, what)])
        ax.plot(layers, [amax[(ref, what)][l] for l in layers], style, marker=".", label=what.upper() + " amax")
    ax.set_yscale("log")
    ax.set_xlabel("layer")
    ax.set_ylabel("amax over the evaluated tokens (%s rows)" % ref)
    ax.set_title("K and V magnitude per layer")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    out = a.out.rstrip("/") + "/model-kv-layers.png"
    fig.savefig(out, dpi=90)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
