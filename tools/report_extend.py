#!/usr/bin/env python3
"""tools/report_extend.py: writes reports/gpu-extend-h200.md from one device call's files of
tools/gpu_run.sh step `extend` (the conformance report, lowp's extend bench CSV and PyTorch
SDPA's on the same shapes), so that every number in the report comes from those files.
Standard library only.

  python3 tools/report_extend.py --conform reports/gpu-extend-conform-h200.md \\
      --bench reports/gpu-extend-bench-h200.csv --sdpa reports/sdpa-extend-bench-h200.csv \\
      --call "<the device command>" --commit <hash> [--ab NAME=CSV ...] [--notes NOTES.md] \
      --out reports/gpu-extend-h200.md

Targets (issue #22): the extend attention >= 0.5x the throughput of the fastest PyTorch SDPA
backend (causal, BF16 K/V) on the same shape; the prefix dequantize into the workspace >= 80%
of a streaming copy of its bytes; the chunk's quantize-on-write <= 1% of the attention time.
Throughput is compared as time (the same FLOP count on both sides: 4 x heads x dim per visible
query-key pair), so the ratio is SDPA time / lowp time.
"""
import argparse
import csv
import sys


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conform", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--sdpa", required=True)
    ap.add_argument("--call", required=True, help="the device command, shown in the report")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", default="2026-12-02")
    ap.add_argument("--ab", nargs="*", default=[], metavar="NAME=CSV",
                    help="other kernel variants' bench CSVs (LOWP_GPU_EXTEND_KERNEL=NAME), same call")
    ap.add_argument("--notes", help="a Markdown file appended as the report's last section (its figures quote the tables)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    bench = rows(a.bench)
    sdpa = {}
    for r in rows(a.sdpa):
        if r["median_us"]:
            sdpa.setdefault((int(r["chunk"]), int(r["prefix"])), {})[r["backend"]] = float(r["median_us"])
    with open(a.conform) as f:
        conform = f.read().strip()

    L = ["# Extend and prefill attention on the H200 (%s)" % a.date, "",
         "Machine: the device machine, one NVIDIA H200 (sm_90, 132 SMs), CUDA 13.0, torch 2.11.0+cu130.",
         "Kernel: gpu/kernels/extend.cu at commit %s. One device call:" % a.commit, "",
         "    " + a.call, "",
         "Written by `tools/report_extend.py` (its docstring has the command) from that call's",
         "[gpu-extend-conform-h200.md](gpu-extend-conform-h200.md),",
         "[gpu-extend-bench-h200.csv](gpu-extend-bench-h200.csv) and",
         "[sdpa-extend-bench-h200.csv](sdpa-extend-bench-h200.csv)" +
         (", the variants' CSVs named below" if a.ab else "") +
         (", and the last section from %s (its figures quote the tables)" % a.notes.split("/")[-1] if a.notes else "") + ".", "",
         "## Conformance (the conformance report, as written)", ""]
    L += ["> " + l if l else ">" for l in conform.splitlines()]
    L += ["", "## Speed", "",
          "Batch 1, 32 query / 8 KV heads, head dim 128; lowp's attention reads the FP8 E4M3 workspace, "
          "SDPA reads BF16 K/V (its fastest backend per shape: cuDNN or flash; causal, bottom-right "
          "aligned when the chunk has a prefix). `ws` is the NVFP4 prefix + chunk -> FP8 workspace fill, "
          "against a device-to-device copy of the same bytes; `kv write` the chunk's quantize-on-write "
          "into the NVFP4 cache.", "",
          "| kernel | chunk | prefix | lowp us | lowp TFLOP/s | fastest SDPA us (backend) | SDPA / lowp time (target >= 0.5) "
          "| ws fill GB/s | of the copy (target >= 0.80) | kv write us | of the attention (target <= 1%) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    met = {"attn": [0, 0], "ws": [0, 0], "kvw": [0, 0]}
    for r in bench:
        c, p = int(r["chunk"]), int(r["prefix"])
        us = float(r["us_median"])
        s = sdpa.get((c, p), {})
        best = min(s, key=s.get) if s else None
        ratio = s[best] / us if best else None
        if ratio is not None:
            met["attn"][ratio >= 0.5] += 1
        ws = ""
        if r["ws_us"] and float(r["ws_us"]) > 0:
            eff = float(r["ws_eff"])
            met["ws"][eff >= 0.8] += 1
            kv = float(r["kvw_share"])
            met["kvw"][kv <= 0.01] += 1
            ws = "| %.0f | %.2f | %.1f | %.2f%% |" % (float(r["ws_gbps"]), eff, float(r["kvw_us"]), 100 * kv)
        else:
            ws = "| - | - | - | - |"
        L.append("| %s | %d | %d | %.1f | %.1f | %s | %s %s" % (
            r["kernel"], c, p, us, float(r["tflops"]),
            "%.1f (%s)" % (s[best], best) if best else "-",
            "%.3f" % ratio if ratio is not None else "-", ws))
    L += ["", "Targets met: attention >= 0.5x the fastest SDPA at %d of %d shapes; workspace fill >= 0.80 "
          "of the copy at %d of %d; quantize-on-write <= 1%% of the attention at %d of %d." % (
              met["attn"][1], sum(met["attn"]), met["ws"][1], sum(met["ws"]), met["kvw"][1], sum(met["kvw"])), ""]
    if a.ab:
        var = []
        for spec in a.ab:
            name, path = spec.split("=", 1)
            var.append((name, {(r["kernel"], int(r["chunk"]), int(r["prefix"])): float(r["us_median"])
                               for r in rows(path)}))
        L += ["## Kernel variants (the same call)", "",
              "`LOWP_GPU_EXTEND_KERNEL=NAME lowp gpu bench --kernel extend,prefill`: time in us and its ratio to the "
              "default kernel's (the table above); every variant computes the same bits (the conformance above "
              "covers the default; `v1` is the first kernel).", "",
              "| kernel | chunk | prefix | default us | " + " | ".join("%s us (ratio)" % n for n, _ in var) + " |",
              "|---|---:|---:|---:|" + "---:|" * len(var)]
        for r in bench:
            k = (r["kernel"], int(r["chunk"]), int(r["prefix"]))
            us = float(r["us_median"])
            cells = ["%.1f (%.2f)" % (v[k], v[k] / us) if k in v else "-" for _, v in var]
            L.append("| %s | %d | %d | %.1f | %s |" % (k[0], k[1], k[2], us, " | ".join(cells)))
        L.append("")
    if a.notes:
        with open(a.notes) as f:
            L += [f.read().rstrip("\n"), ""]
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
