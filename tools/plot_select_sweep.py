#!/usr/bin/env python3
"""tools/plot_select_sweep.py: plots and Markdown tables of `lowp select-sweep`'s CSV.

    .venv/bin/python tools/plot_select_sweep.py --csv reports/select-sweep.csv \\
        --out-dir reports/plots [--md reports/select-sweep-tables.md] [--layer-info SWEEP.txt]

(matplotlib from PyPI: `.venv/bin/pip install matplotlib`; only the plots need it.)

Writes into --out-dir:
  select-jaccard.png  one panel per (selector, workload): the mean Jaccard similarity of
                      each key format's selection to the BF16 keys' selection, against the
                      context length (log2 axis)
  select-needle.png   needle workload: the fraction of selections that keep the needle's
                      block (token for DSA), per key format, at each context, beside the
                      BF16 keys' own fraction (dashed)
  select-error.png    the sparse attention's output error against the exact one: per
                      selector, the changed selection's error (err_sel, solid) and the
                      quantized values' (err_val, dashed) per key format, averaged over
                      the workloads, against the context
  select-certified.png  the share of selections certified stable per key format (QSA, DSA,
                      MoBA: the selectors with a score bound), summed over the workloads
and with --md a Markdown file of tables: a summary per (selector, key format) of the mean
Jaccard, the output-error split and the certified-stable share per context; then per
selector, rows = key format x workload, columns = contexts, cells = mean Jaccard (and
recall@k).

A CSV of `lowp select-sweep --keys-from` (real keys: the workload column is the layer,
blk.L) gets instead, with the same summary (averaged over the layers):
  select-real-jaccard.png  per selector, the mean Jaccard of each key format against the
                      layer, one panel per context
  select-real-error.png    per selector, err_sel (solid) and err_val (dashed) per key
                      format against the layer, at the longest context
and in --md a per-layer table at the longest context (mean Jaccard per key format, the
NVFP4 keys' zero block scales at g = 1, and with --layer-info the sweep's text output, the
layer's K amax and rms from its "# blk.L: ..." lines).
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
        for k in ("jaccard_mean", "jaccard_min", "recall_mean", "err_sel", "err_val", "err_both", "sel_share"):
            r[k] = float(r[k]) if r.get(k) not in (None, "") else None
        r["certified"] = int(r["certified"]) if r.get("certified") not in (None, "") else None
    return rows


def by_format(rows):
    """{(selector, keys): {ctx: [rows over the workloads]}}, in the CSV's order"""
    out = {}
    for r in rows:
        out.setdefault((r["selector"], r["keys"]), defaultdict(list))[r["ctx"]].append(r)
    return out


def ctx_label(c):
    """4096 -> 4K; a context that is not a multiple of 1024 in tokens"""
    return f"{c // 1024}K" if c % 1024 == 0 else str(c)


def is_real(rows):
    return all(r["workload"].startswith("blk.") for r in rows)


def layer_of(r):
    return int(r["workload"][4:])


def summary(rows):
    """per (selector, keys) and context, over the workloads: mean Jaccard; the output-error
    split (mean err_sel, mean err_val, and the changed selection's share of their sum);
    the certified-stable selections / all"""
    over = "the layers" if is_real(rows) else "the workloads"
    ctxs = sorted({r["ctx"] for r in rows})
    head = "| selector | keys | " + " | ".join(ctx_label(c) for c in ctxs) + " |"
    rule = "|---|---|" + "---:|" * len(ctxs)
    jac, err, cert = [head, rule], [head, rule], [head, rule]
    for (sel, keys), per in by_format(rows).items():
        jc, ec, cc = [], [], []
        for c in ctxs:
            rs = per.get(c, [])
            if not rs:
                jc.append("-"), ec.append("-"), cc.append("-")
                continue
            jc.append(f"{sum(r['jaccard_mean'] for r in rs) / len(rs):.3f}")
            es = [r for r in rs if r["err_sel"] is not None]
            if es:
                a = sum(r["err_sel"] for r in es) / len(es)
                b = sum(r["err_val"] for r in es) / len(es)
                ec.append(f"{a:.3g} / {b:.3g} ({a / (a + b) if a + b > 0 else 0:.2f})")
            else:
                ec.append("-")
            cs = [r for r in rs if r["certified"] is not None]
            cc.append(f"{sum(r['certified'] for r in cs)}/{sum(r['selections'] for r in cs)}" if cs else "-")
        jac.append(f"| {sel} | {keys} | " + " | ".join(jc) + " |")
        err.append(f"| {sel} | {keys} | " + " | ".join(ec) + " |")
        cert.append(f"| {sel} | {keys} | " + " | ".join(cc) + " |")
    return (f"#### Mean Jaccard to the BF16 keys' selection (over {over})\n\n" + "\n".join(jac) +
            "\n\n#### Output error: changed selection / quantized values (the selection's share)\n\n"
            "relative L2 error of the sparse attention's output against the exact one (reference "
            f"selection, BF16 K and V, binary64), means over {over}: `err_sel` the quantized "
            "keys' selection with exact values, `err_val` the reference selection with K/V in the "
            "values cache through QSA's production path; in brackets err_sel / (err_sel + err_val).\n\n" +
            "\n".join(err) +
            f"\n\n#### Certified stable: selections / all (summed over {over})\n\n"
            "a selection counts when the score error bounds prove both the quantized keys' and the "
            "BF16 keys' top-k equal to the exact scores' (`-`: no row of the cell has a certified count; a row has none where a format's keys leave the bound's premises, e.g. NVFP4 at g = 1 on `small`, the clamp case of `lowp/select.h`).\n\n" + "\n".join(cert) + "\n")


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
        out.append("| keys | workload | " + " | ".join(ctx_label(c) for c in ctxs) + " |")
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


def layer_info(path):
    """{layer: (K amax, K rms)} from the "# blk.L: ... K amax A, rms R" lines of the sweep's text"""
    out = {}
    for line in open(path):
        if line.startswith("# blk.") and "K amax" in line:
            layer = int(line[6:line.index(":")])
            tail = line.split("K amax")[1].replace(",", " ").split()
            out[layer] = (float(tail[0]), float(tail[2]))
    return out


def layer_table(rows, info):
    """per layer at the longest context: mean Jaccard per (selector, keys), the NVFP4 g=1
    keys' zero block scales (of all blocks), and the K amax / rms when info has them"""
    top = max(r["ctx"] for r in rows)
    rs = [r for r in rows if r["ctx"] == top]
    cols = list(dict.fromkeys((r["selector"], r["keys"]) for r in rs))
    cell = {(layer_of(r), r["selector"], r["keys"]): r for r in rs}
    layers = sorted({layer_of(r) for r in rs})
    head = ("| layer | " + ("K amax | K rms | " if info else "") + "nvfp4 g=1 zero scales | " +
            " | ".join(f"{s} {k}" for s, k in cols) + " |")
    out = [f"#### Per layer at {top} tokens: mean Jaccard to the BF16 keys' selection\n", head,
           "|---:|" + ("---:|---:|" if info else "") + "---:|" + "---:|" * len(cols)]
    for layer in layers:
        z = cell.get((layer, "moba", "nvfp4 g=1")) or cell.get((layer, "nsa", "nvfp4 g=1"))
        zc = f"{int(z['zero_scales'])}/{int(z['blocks'])}" if z else "-"
        ic = (f"{info[layer][0]:.3g} | {info[layer][1]:.3g} | " if layer in info else "- | - | ") if info else ""
        cells = [f"{cell[(layer, s, k)]['jaccard_mean']:.3f}" if (layer, s, k) in cell else "-" for s, k in cols]
        out.append(f"| {layer} | {ic}{zc} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def jaccard_grid(plt, rows, cols, col_of, x_of, title, xlabel, logx, size, path):
    """one panel per (selector, column value col_of(r) in cols): the mean Jaccard of each
    key format against x_of(r) (log2 axis when logx); size: inches per panel"""
    sels = list(dict.fromkeys(r["selector"] for r in rows))
    fig, axes = plt.subplots(len(sels), len(cols), figsize=(size[0] * len(cols), size[1] * len(sels)),
                             squeeze=False, sharey=True)
    for i, s in enumerate(sels):
        for j, c in enumerate(cols):
            ax = axes[i][j]
            series = defaultdict(list)
            for r in rows:
                if r["selector"] == s and col_of(r) == c:
                    series[r["keys"]].append((x_of(r), r["jaccard_mean"]))
            for keys, pts in series.items():
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=keys)
            if logx:
                ax.set_xscale("log", base=2)
            ax.set_title(title(s, c), fontsize=10)
            ax.grid(True, alpha=0.3)
            if j == 0:
                ax.set_ylabel("mean Jaccard vs BF16 keys")
            if i == len(sels) - 1:
                ax.set_xlabel(xlabel)
            if j == len(cols) - 1 and series:
                ax.legend(fontsize=7, loc="lower left")
    save(plt, fig, path)


def real_plots(rows, out_dir):
    plt = pyplot()

    sels = list(dict.fromkeys(r["selector"] for r in rows))
    ctxs = sorted({r["ctx"] for r in rows})
    jaccard_grid(plt, rows, ctxs, lambda r: r["ctx"], layer_of, lambda s, c: f"{s}, {c} tokens", "layer", False,
                 (4.5, 3.4), os.path.join(out_dir, "select-real-jaccard.png"))

    top = ctxs[-1]
    fig, axes = plt.subplots(1, len(sels), figsize=(5.5 * len(sels), 3.8), squeeze=False)
    for i, s in enumerate(sels):
        ax = axes[0][i]
        series = defaultdict(list)
        for r in rows:
            if r["selector"] == s and r["ctx"] == top:
                series[r["keys"]].append((layer_of(r), r["err_sel"], r["err_val"]))
        error_panel(ax, series, f"{s}, {top} tokens: err_sel (solid; 0 drawn at 1e-4), err_val (dashed)", "layer",
                    1e-4)
    finish(plt, fig, axes, "relative L2 output error", os.path.join(out_dir, "select-real-error.png"))


def error_panel(ax, series, title, xlabel, floor=1e-9):
    """{keys: [(x, err_sel, err_val)]}: err_sel solid (floored at `floor` for the log axis:
    an unchanged selection's 0), err_val dashed in the same colour"""
    for keys, pts in series.items():
        if not pts:
            continue
        pts = sorted(pts)
        line, = ax.plot([p[0] for p in pts], [max(p[1], floor) for p in pts], marker="o", label=keys)
        ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="x", linestyle="--", color=line.get_color())
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)


def share_axes(ax, title):
    """a panel of shares (0..1) against the context"""
    ax.set_xscale("log", base=2)
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("context (tokens)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend"""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def finish(plt, fig, axes, ylabel, path):
    axes[0][0].set_ylabel(ylabel)
    save(plt, fig, path)


def plots(rows, out_dir):
    plt = pyplot()

    wls = list(dict.fromkeys(r["workload"] for r in rows))
    jaccard_grid(plt, rows, wls, lambda r: r["workload"], lambda r: r["ctx"], lambda s, w: f"{s}, {w}",
                 "context (tokens)", True, (4, 3.2), os.path.join(out_dir, "select-jaccard.png"))

    fmt = by_format(rows)
    sels = list(dict.fromkeys(r["selector"] for r in rows))
    fig, axes = plt.subplots(1, len(sels), figsize=(4.5 * len(sels), 3.6), squeeze=False)
    for i, s in enumerate(sels):
        ax = axes[0][i]
        series = {}
        for (sel, keys), per in fmt.items():
            if sel != s:
                continue
            cs = sorted(c for c, rs in per.items() if all(r["err_sel"] is not None for r in rs))
            series[keys] = [(c, sum(r["err_sel"] for r in per[c]) / len(per[c]),
                             sum(r["err_val"] for r in per[c]) / len(per[c])) for c in cs]
        error_panel(ax, series, f"{s}: err_sel (solid), err_val (dashed)", "context (tokens)")
        ax.set_xscale("log", base=2)
    finish(plt, fig, axes, "relative L2 output error", os.path.join(out_dir, "select-error.png"))

    csels = [s for s in sels if any(r["selector"] == s and r["certified"] is not None for r in rows)]
    if csels:
        fig, axes = plt.subplots(1, len(csels), figsize=(4.5 * len(csels), 3.4), squeeze=False, sharey=True)
        for i, s in enumerate(csels):
            ax = axes[0][i]
            for (sel, keys), per in fmt.items():
                if sel != s:
                    continue
                cs = sorted(per)
                ax.plot(cs, [sum(r["certified"] or 0 for r in per[c]) / sum(r["selections"] for r in per[c])
                             for c in cs], marker="o", label=keys)
            share_axes(ax, f"{s}: certified stable")
        finish(plt, fig, axes, "share of selections certified", os.path.join(out_dir, "select-certified.png"))

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
        share_axes(ax, f"{s}: needle kept")
    finish(plt, fig, axes, "share of selections holding the needle", os.path.join(out_dir, "select-needle.png"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--md", default=None)
    ap.add_argument("--layer-info", default=None, help="real keys: the sweep's text output (K amax per layer)")
    a = ap.parse_args()
    rows = load(a.csv)
    if not rows:
        sys.exit(f"plot_select_sweep: {a.csv} has no rows")
    os.makedirs(a.out_dir, exist_ok=True)
    real = is_real(rows)
    if a.md:
        with open(a.md, "w") as f:
            if real:
                f.write(summary(rows) + "\n" + layer_table(rows, layer_info(a.layer_info) if a.layer_info else {}))
            else:
                f.write(summary(rows) + "\n" + tables(rows) + "\n")
    if real:
        real_plots(rows, a.out_dir)
    else:
        plots(rows, a.out_dir)


if __name__ == "__main__":
    main()
