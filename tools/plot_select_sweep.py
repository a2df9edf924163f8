#!/usr/bin/env python3
"""tools/plot_select_sweep.py: plots and Markdown tables of `lowp select-sweep`'s CSV.

    .venv/bin/python tools/plot_select_sweep.py --csv reports/select-sweep.csv \\
        --out-dir reports/plots [--md reports/select-sweep-tables.md]

(matplotlib from PyPI: `.venv/bin/pip install matplotlib`; only the plots need it.)

Writes into --out-dir:
  select-jaccard.png  one panel per (selector, workload): the mean Jaccard similarity of
                      each key format's selection to the BF16 keys' selection, against the
                      context length (log2 axis)
  select-needle.png   needle workload: the fraction of selections that keep the needle's
                      block (token for DSA), per key format, at each context, beside the
                      BF16 keys' own fraction (dashed)
and with --md a Markdown file of tables: per selector, rows = key format x workload,
columns = contexts, cells = mean Jaccard (and recall@k).
"""
import argparse
import csv
import os
import sys
from collections import defaultdict


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for k in ("ctx", "selections", "unchanged", "lost", "deepest", "needle_kept", "needle_kept_ref", "needles"):
            r[k] = int(r[k])
        for k in ("jaccard_mean", "jaccard_min", "recall_mean"):
            r[k] = float(r[k])
    return rows


def tables(rows):
    out = []
    by_sel = defaultdict(list)
    for r in rows:
        by_sel[r["selector"]].append(r)
    for sel, rs in by_sel.items():
        ctxs = sorted({r["ctx"] for r in rs})
        out.append(f"### {sel}\n")
        out.append("mean Jaccard / recall@k of the selection against the BF16 keys' selection; "
                   "`unchanged` is the share of selections that are identical sets.\n")
        out.append("| keys | workload | " + " | ".join(f"{c // 1024}K" for c in ctxs) + " |")
        out.append("|---|---|" + "---:|" * len(ctxs))
        keyed = defaultdict(dict)
        for r in rs:
            keyed[(r["keys"], r["workload"])][r["ctx"]] = r
        order = []
        for r in rs:
            if (r["keys"], r["workload"]) not in order:
                order.append((r["keys"], r["workload"]))
        for key in order:
            cells = []
            for c in ctxs:
                r = keyed[key].get(c)
                cells.append("-" if r is None else
                             f"{r['jaccard_mean']:.3f} / {r['recall_mean']:.3f} ({r['unchanged']}/{r['selections']})")
            out.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def plots(rows, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sels = list(dict.fromkeys(r["selector"] for r in rows))
    wls = list(dict.fromkeys(r["workload"] for r in rows))
    fig, axes = plt.subplots(len(sels), len(wls), figsize=(4 * len(wls), 3.2 * len(sels)), squeeze=False,
                             sharey=True)
    for i, s in enumerate(sels):
        for j, w in enumerate(wls):
            ax = axes[i][j]
            series = defaultdict(list)
            for r in rows:
                if r["selector"] == s and r["workload"] == w:
                    series[r["keys"]].append((r["ctx"], r["jaccard_mean"]))
            for keys, pts in series.items():
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=keys)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{s}, {w}", fontsize=10)
            ax.grid(True, alpha=0.3)
            if j == 0:
                ax.set_ylabel("mean Jaccard vs BF16 keys")
            if i == len(sels) - 1:
                ax.set_xlabel("context (tokens)")
            if j == len(wls) - 1:
                ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "select-jaccard.png"), dpi=110)
    plt.close(fig)

    nrows = [r for r in rows if r["needles"] > 0]
    if not nrows:
        return
    sels = list(dict.fromkeys(r["selector"] for r in nrows))
    fig, axes = plt.subplots(1, len(sels), figsize=(4.5 * len(sels), 3.4), squeeze=False, sharey=True)
    for i, s in enumerate(sels):
        ax = axes[0][i]
        series = defaultdict(list)
        ref = {}
        for r in nrows:
            if r["selector"] == s:
                series[r["keys"]].append((r["ctx"], r["needle_kept"] / r["needles"]))
                ref[r["ctx"]] = r["needle_kept_ref"] / r["needles"]
        for keys, pts in series.items():
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=keys)
        rc = sorted(ref)
        ax.plot(rc, [ref[c] for c in rc], "k--", label="bf16 (reference)")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.05, 1.05)
        ax.set_title(f"{s}: needle kept", fontsize=10)
        ax.set_xlabel("context (tokens)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("share of selections holding the needle")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "select-needle.png"), dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--md", default=None)
    a = ap.parse_args()
    rows = load(a.csv)
    if not rows:
        sys.exit(f"plot_select_sweep: {a.csv} has no rows")
    os.makedirs(a.out_dir, exist_ok=True)
    if a.md:
        with open(a.md, "w") as f:
            f.write(tables(rows) + "\n")
    plots(rows, a.out_dir)


if __name__ == "__main__":
    main()
