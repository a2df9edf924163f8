#!/usr/bin/env python3
"""tools/report_decode_peers.py: lowp's decode against its peers measured in the same device run.

    .venv/bin/python tools/report_decode_peers.py --lowp gpu-bench.csv --sdpa sdpa-bench.csv \\
        --flashinfer flashinfer-bench.csv --out report.md [--plot plot.png] [--title TEXT]

Inputs are the CSVs one tools/gpu_run.sh call writes (steps bench and flashinfer):
  --lowp        `lowp gpu bench --csv`: kernel, format, batch, ctx, median_us, ..., ratio
                (ratio: the share of the streaming read of the kernel's own bytes);
  --sdpa        tools/sdpa_bench.py: backend, batch, ctx, ..., median_us (BF16 KV);
  --flashinfer  tools/flashinfer_bench.py: backend (flashinfer-tc-fp8 / -bf16), batch, ctx, ...
Rows without a median (skipped shapes) are left out. Writes --out: one table row per shape
that lowp ran, with the fastest SDPA backend, FlashInfer FP8 and BF16, and issue #22's ratios
(NVFP4 / SDPA <= 0.55, FP8 / SDPA <= 0.65, BF16 / SDPA <= 1.10, FP8 / FlashInfer FP8 <= 1,
NVFP4 / FlashInfer FP8 <= 0.65, at batch 1 NVFP4 >= 60% of streaming and <= 0.65x FP8),
each marked where it misses, and a count of the targets met at contexts >= 32K. --plot: lowp
time / fastest peer (SDPA or FlashInfer, any dtype) per format, one panel per batch size
(needs matplotlib; skipped with a line on stderr when it is missing).
Exit status: 0, or 2 on unreadable input.
"""
import argparse
import csv
import sys


def rows(path):
    try:
        with open(path, newline="") as f:
            return [r for r in csv.DictReader(f) if r.get("median_us")]
    except OSError as e:
        sys.exit("report_decode_peers: cannot read %s: %s" % (path, e.strerror))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lowp", required=True)
    ap.add_argument("--sdpa", required=True)
    ap.add_argument("--flashinfer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot")
    ap.add_argument("--title", default="lowp decode against SDPA and FlashInfer (H200, one run)")
    a = ap.parse_args()
    lowp, sdpa, fi = {}, {}, {}
    for r in rows(a.lowp):
        if r["kernel"] == "decode":
            lowp[(r["format"], int(r["batch"]), int(r["ctx"]))] = (float(r["median_us"]), float(r["ratio"]))
    for r in rows(a.sdpa):
        k = (int(r["batch"]), int(r["ctx"]))
        t = float(r["median_us"])
        if k not in sdpa or t < sdpa[k][0]:
            sdpa[k] = (t, r["backend"])
    for r in rows(a.flashinfer):
        fi[(r["backend"].rsplit("-", 1)[-1], int(r["batch"]), int(r["ctx"]))] = float(r["median_us"])
    shapes = sorted({(b, c) for (_, b, c) in lowp})
    met = {k: [0, 0] for k in ("nvfp4/sdpa", "fp8/sdpa", "bf16/sdpa", "fp8/fi", "nvfp4/fi")}
    lines = ["| batch | ctx | lowp bf16 us | lowp fp8 us | lowp nvfp4 us | fastest SDPA us | FlashInfer fp8 us | "
             "FlashInfer bf16 us | nvfp4/SDPA | fp8/SDPA | bf16/SDPA | fp8/FI fp8 | nvfp4/FI fp8 | nvfp4 stream "
             "| nvfp4/fp8 |", "|" + "---:|" * 15]

    def cell(x, lim, key, long):
        if x is None:
            return ""
        ok = x <= lim
        if long:
            met[key][0] += ok
            met[key][1] += 1
        return ("%.3f" % x) if ok else ("**%.3f**" % x)
    for b, c in shapes:
        t = {f: lowp.get((f, b, c), (None, None))[0] for f in ("bf16", "fp8_e4m3", "nvfp4")}
        s = sdpa.get((b, c))
        f8, f16 = fi.get(("fp8", b, c)), fi.get(("bf16", b, c))
        long = c >= 32768
        div = lambda x, y: x / y if x is not None and y else None  # noqa: E731
        st = lowp.get(("nvfp4", b, c), (None, None))[1]
        stream = "" if st is None or b != 1 else ("%.0f%%" % (100 * st) if st >= 0.6 else "**%.0f%%**" % (100 * st))
        nf = div(t["nvfp4"], t["fp8_e4m3"])
        lines.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            b, c, *["" if t[f] is None else "%.1f" % t[f] for f in ("bf16", "fp8_e4m3", "nvfp4")],
            "" if s is None else "%.1f (%s)" % s, "" if f8 is None else "%.1f" % f8,
            "" if f16 is None else "%.1f" % f16,
            cell(div(t["nvfp4"], s and s[0]), 0.55, "nvfp4/sdpa", long),
            cell(div(t["fp8_e4m3"], s and s[0]), 0.65, "fp8/sdpa", long),
            cell(div(t["bf16"], s and s[0]), 1.10, "bf16/sdpa", long),
            cell(div(t["fp8_e4m3"], f8), 1.0, "fp8/fi", long), cell(div(t["nvfp4"], f8), 0.65, "nvfp4/fi", long),
            stream, "" if nf is None or b != 1 else ("%.2f" % nf if nf <= 0.65 else "**%.2f**" % nf)))
    names = {"nvfp4/sdpa": "NVFP4 <= 0.55x fastest SDPA", "fp8/sdpa": "FP8 <= 0.65x fastest SDPA",
             "bf16/sdpa": "BF16 <= 1.10x fastest SDPA", "fp8/fi": "FP8 <= FlashInfer FP8",
             "nvfp4/fi": "NVFP4 <= 0.65x FlashInfer FP8"}
    with open(a.out, "w") as f:
        f.write("Times are medians in microseconds; a ratio in bold misses its target. At contexts >= 32K:\n\n")
        for k, (m, n) in met.items():
            f.write("- %s: met at %d of %d shapes\n" % (names[k], m, n))
        f.write("\n" + "\n".join(lines) + "\n")
    if a.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("report_decode_peers: matplotlib missing, no plot", file=sys.stderr)
            return 0
        batches = sorted({b for b, _ in shapes})
        fig, axes = plt.subplots(1, len(batches), figsize=(4 * len(batches), 3.4), sharey=True, squeeze=False)
        for ax, b in zip(axes[0], batches):
            for fmt in ("bf16", "fp8_e4m3", "nvfp4"):
                xs, ys = [], []
                for bb, c in shapes:
                    peers = [x for x in (sdpa.get((b, c), (None,))[0], fi.get(("fp8", b, c)), fi.get(("bf16", b, c)))
                             if x is not None]
                    if bb == b and (fmt, b, c) in lowp and peers:
                        xs.append(c)
                        ys.append(lowp[(fmt, b, c)][0] / min(peers))
                ax.plot(xs, ys, marker="o", label="lowp " + fmt)
            ax.axhline(1.0, color="gray", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_title("batch %d" % b)
            ax.set_xlabel("context (tokens)")
        axes[0][0].set_ylabel("lowp time / fastest peer")
        axes[0][0].legend(fontsize=8)
        fig.suptitle(a.title, fontsize=10)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
