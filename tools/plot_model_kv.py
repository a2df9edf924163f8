#!/usr/bin/env python3
"""tools/plot_model_kv.py: the plots of reports/model-kv.md from `lowp model eval`'s CSVs.

    .venv/bin/python tools/plot_model_kv.py --layers reports/model-kv-layers.csv --out reports

writes model-kv-layers.png: per layer, the relative RMS error of K, V (the worst of the KV
heads) and of the layer's attention output (the worst of the query heads), one line per
format; and the K and V amax per layer (of the reference values the first format's rows
saw) on a log axis. Needs matplotlib (exit 77 without it)."""
import argparse
import csv
import sys
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_model_kv: matplotlib is missing", file=sys.stderr)
        return 77
    err = defaultdict(lambda: defaultdict(list))  # (format, what) -> layer -> [(rel, n)]
    amax = defaultdict(lambda: defaultdict(float))  # (format, what) -> layer -> max amax
    with open(a.layers) as f:
        for r in csv.DictReader(f):
            key = (r["format"], r["what"])
            layer = int(r["layer"])
            err[key][layer].append((float(r["rel_rms"]), int(r["elements"])))
            amax[key][layer] = max(amax[key][layer], float(r["amax"]))
    formats = sorted({k[0] for k in err}, key=lambda s: list(dict.fromkeys(k[0] for k in err)).index(s))
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
