#!/usr/bin/env python3
"""tools/plot_gpu_bench.py: plots of lowp's GPU decode benchmark against the PyTorch SDPA peer.

    .venv/bin/python tools/plot_gpu_bench.py --sdpa sdpa-h200.csv --ours decode-h200.csv \\
        --out-dir reports/plots [--prefix h200-] [--peak-gbps 4800]

Inputs (CSV with a header; extra columns are ignored, either file may be left out):
  --sdpa  tools/sdpa_bench.py's output: backend, batch, ctx, ..., median_us, ..., gbps, note.
          Rows without a median (unsupported, skipped) are left out of the plots and listed.
  --ours  lowp's decode benchmark: kernel, format, batch, ctx, median_us, gbps, read_gbps.
          One line per (kernel, format).

Writes three PNG files into --out-dir (named <prefix>time.png, <prefix>bandwidth.png,
<prefix>speedup.png), one panel per batch size, context length on a log2 axis:
  time       median time per decode call (us, log axis), every SDPA backend and every
             lowp (kernel, format)
  bandwidth  fraction of the HBM peak (--peak-gbps, default 4800 GB/s, the H200's HBM3e):
             SDPA gbps (BF16 K+V bytes / time) and lowp's --ours-bw-column (default
             read_gbps: the bytes the kernel reads / time)
  speedup    time of the fastest SDPA backend at that shape / lowp's time (> 1: lowp is
             faster); only when both files are given

Needs matplotlib (not installed by tools/setup.sh: `.venv/bin/pip install matplotlib`).
Exit status: 0 written, 2 bad usage or unreadable input, 77 matplotlib missing.
"""
import argparse
import csv
import math
import os
import sys

PROG = "plot_gpu_bench"


def log(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)


def num(v):
    """float of a CSV cell, or None when empty / not a finite number."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class InputError(Exception):
    pass


def read_csv(path, needed):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as ex:
        raise InputError(f"{path}: {ex}") from None
    if not rows:
        raise InputError(f"{path}: no rows")
    missing = [c for c in needed if c not in rows[0]]
    if missing:
        raise InputError(f"{path}: missing columns {missing} (has {list(rows[0])})")
    return rows


def load_sdpa(path):
    """{backend: {(batch, ctx): (median_us, gbps)}} and the rows left out."""
    series, dropped = {}, []
    for r in read_csv(path, ["backend", "batch", "ctx", "median_us", "gbps"]):
        b, ctx, t = num(r["batch"]), num(r["ctx"]), num(r["median_us"])
        if b is None or ctx is None or t is None or t <= 0:
            dropped.append(f"sdpa {r['backend']} B={r['batch']} L={r['ctx']}: {r.get('note', '')}")
            continue
        series.setdefault(f"SDPA {r['backend']}", {})[(int(b), int(ctx))] = (t, num(r["gbps"]))
    return series, dropped


def load_ours(path, bw_col):
    series, dropped = {}, []
    for r in read_csv(path, ["kernel", "format", "batch", "ctx", "median_us", bw_col]):
        b, ctx, t = num(r["batch"]), num(r["ctx"]), num(r["median_us"])
        name = f"{r['kernel']} {r['format']}"
        if b is None or ctx is None or t is None or t <= 0:
            dropped.append(f"ours {name} B={r['batch']} L={r['ctx']}")
            continue
        series.setdefault(name, {})[(int(b), int(ctx))] = (t, num(r[bw_col]))
    return series, dropped


def panels(plt, batches, title):
    n = len(batches)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
    fig.suptitle(title)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, dict(zip(batches, flat))


def style(name, sdpa_names, colors):
    st = {"color": colors.get(name)}
    if name in sdpa_names:
        st.update(linestyle="--", marker="s", linewidth=1.4, markersize=4)
    else:
        st.update(linestyle="-", marker="o", linewidth=1.8, markersize=4)
    return st


def ctx_axis(ax, ctxs):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ctxs)
    ax.set_xticklabels([f"{c // 1024}K" if c >= 1024 and c % 1024 == 0 else str(c) for c in ctxs])
    ax.set_xlabel("context length L (tokens)")
    ax.grid(True, which="both", alpha=0.3)


def plot_metric(plt, series, sdpa_names, colors, batches, ctxs, value, ylabel, title, path, logy,
                hline=None, ylim=None):
    fig, axmap = panels(plt, batches, title)
    handles = {}
    for b, ax in axmap.items():
        for name in sorted(series, key=lambda n: (n not in sdpa_names, n)):
            pts = sorted((ctx, value(v)) for (bb, ctx), v in series[name].items() if bb == b)
            pts = [(c, y) for c, y in pts if y is not None]
            if not pts:
                continue
            (line,) = ax.plot([c for c, _ in pts], [y for _, y in pts], label=name, **style(name, sdpa_names, colors))
            handles.setdefault(name, line)
        ctx_axis(ax, ctxs)
        if logy:
            ax.set_yscale("log")
        if hline is not None:
            ax.axhline(hline, color="k", linewidth=0.8, alpha=0.6)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set_title(f"batch {b}")
        ax.set_ylabel(ylabel)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="lower center",
                   ncol=min(len(handles), 4), fontsize="small", frameon=False)
    fig.tight_layout(rect=(0, 0.04 + 0.03 * math.ceil(len(handles) / 4), 1, 0.96))
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(prog="plot_gpu_bench.py",
                                description="Plot lowp's GPU decode benchmark against PyTorch SDPA.")
    p.add_argument("--sdpa", help="tools/sdpa_bench.py CSV")
    p.add_argument("--ours", help="lowp decode bench CSV (kernel, format, batch, ctx, median_us, gbps, read_gbps)")
    p.add_argument("--out-dir", required=True, help="folder for the PNG files (created)")
    p.add_argument("--prefix", default="", help="file name prefix, e.g. h200-")
    p.add_argument("--peak-gbps", type=float, default=4800.0, help="HBM peak in GB/s (default 4800, H200)")
    p.add_argument("--ours-bw-column", default="read_gbps", choices=["read_gbps", "gbps"],
                   help="the --ours column plotted as bandwidth (default read_gbps)")
    p.add_argument("--title", default="", help="text added to every figure title (e.g. the GPU)")
    args = p.parse_args(argv)
    if not args.sdpa and not args.ours:
        p.error("give --sdpa, --ours or both")
    if args.peak_gbps <= 0:
        p.error("--peak-gbps must be positive")

    sdpa, ours, dropped = {}, {}, []
    try:
        if args.sdpa:
            sdpa, d = load_sdpa(args.sdpa)
            dropped += d
        if args.ours:
            ours, d = load_ours(args.ours, args.ours_bw_column)
            dropped += d
    except InputError as ex:
        log(str(ex))
        return 2
    series = {**sdpa, **ours}
    if not series:
        log("no measured rows to plot")
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed: .venv/bin/pip install matplotlib")
        return 77

    keys = {k for s in series.values() for k in s}
    batches = sorted({b for b, _ in keys})
    ctxs = sorted({c for _, c in keys})
    sdpa_names = set(sdpa)
    # One colour per series, the same in every figure: SDPA backends first, then lowp's.
    palette = plt.rcParams["axes.prop_cycle"].by_key().get("color", [None])
    order = sorted(sdpa) + sorted(ours)
    colors = {name: palette[i % len(palette)] for i, name in enumerate(order)}
    suffix = f" ({args.title})" if args.title else ""
    os.makedirs(args.out_dir, exist_ok=True)
    out = lambda name: os.path.join(args.out_dir, f"{args.prefix}{name}.png")  # noqa: E731
    written = [
        plot_metric(plt, series, sdpa_names, colors, batches, ctxs, lambda v: v[0], "median time per call (us)",
                    f"Decode time, GQA 32/8, d=128{suffix}", out("time"), logy=True),
        plot_metric(plt, series, sdpa_names, colors, batches, ctxs,
                    lambda v: None if v[1] is None else v[1] / args.peak_gbps,
                    f"fraction of {args.peak_gbps:g} GB/s",
                    f"HBM bandwidth fraction (SDPA: gbps; lowp: {args.ours_bw_column}){suffix}",
                    out("bandwidth"), logy=False, hline=1.0, ylim=(0, 1.05)),
    ]
    if sdpa and ours:
        best = {}
        for s in sdpa.values():
            for k, (t, _) in s.items():
                best[k] = min(t, best.get(k, math.inf))
        speed = {name: {k: (best[k] / t, None) for k, (t, _) in s.items() if k in best}
                 for name, s in ours.items()}
        written.append(plot_metric(plt, speed, set(), colors, batches, ctxs, lambda v: v[0],
                                   "fastest SDPA time / lowp time",
                                   f"Speedup over the fastest SDPA backend (> 1: lowp faster){suffix}",
                                   out("speedup"), logy=False, hline=1.0, ylim=(0, None)))
    for line in dropped:
        log(f"not plotted: {line}")
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
