#!/usr/bin/env python3
"""tools/sdpa_bench.py: PyTorch SDPA decode on a BF16 KV cache, the peer for lowp's decode kernels.

    python3 tools/sdpa_bench.py --out sdpa-h200.csv [--quick] [--budget-s 170]
    python3 tools/sdpa_bench.py --dry-run          (the plan only; needs no torch, no GPU)

WHAT IS MEASURED
  torch.nn.functional.scaled_dot_product_attention for one decode step of GQA attention:
  q [B, 32, 1, 128] BF16 (32 query heads, one new token), K and V [B, 8, L, 128] BF16
  (8 KV heads, L cached tokens, contiguous BHSD), no mask, no dropout, default scale
  1/sqrt(128), under torch.inference_mode(). B in {1,4,16,32,64}, L in {4096 ... 131072};
  shapes whose K+V exceed --max-kv-gb (60 GB) are skipped (none in the default grid: the
  largest, B=64 L=131072, is 34.4 GB). --issue-grid: issue #22's grid instead (ISSUE_SHAPES: B in
  {1,2,4,8,16,32,64} at the default L, and B 1-2 at 256K and 1M; 46 shapes).

  Each backend is forced alone with torch.nn.attention.sdpa_kernel([backend]): CUDNN_ATTENTION
  and FLASH_ATTENTION (the peers), EFFICIENT_ATTENTION (extra information). The math backend
  is never enabled, so nothing falls back silently. A backend that refuses a shape gives a
  row with note "unsupported: <first line of the error> (<the reasons torch warned>)".

  GQA. torch 2.11 has enable_gqa=True (since 2.5): K/V keep their 8 heads and the kernel
  maps query head h to KV head h // 4 (torch's repeat_interleave convention). That is the
  default (--gqa auto tries it first; note "enable_gqa"). A backend that refuses enable_gqa
  is run instead on the same K/V with the query heads folded into the query length:
  q.view(B, 8, 4, 128) (heads 4g..4g+3 share KV head g; no mask, so the 4 "tokens" are
  independent rows) and the output viewed back to [B, 32, 1, 128]: no copy of K/V, each
  K/V byte still read once (note "fold"). Expanding K/V to 32 heads by a view is not
  possible without a copy (the stride-0 group dimension cannot merge with the head
  dimension), and repeat_interleave would read and write 4x the cache, so neither is used.
  --gqa native / fold forces one form.

  Time. The GPU time of one SDPA call (all the kernels it launches, e.g. split-KV and its
  combine), from CUDA events recorded around each call. All timed calls are queued behind
  a GPU sleep (torch.cuda._sleep) long enough for the CPU to queue them all, so they run
  back to back and the events do not include Python or launch latency; the script checks
  the sleep was still running when the CPU finished queuing (else it doubles the sleep and
  retries; a note "cpu-gap" remains if it never was). --warmup calls first (cuDNN builds its
  plan then), then --runs timed calls (default 30, >= 20; --quick 20): median, p10, p90.

  Caches. Successive calls rotate over N buffer sets (q, K, V, each its own allocation),
  N = max(4, ceil(256 MB / set)) limited to what --mem-gb (100 GB) holds, at least 1: a set
  is read again only after >= 256 MB (or, for big sets, >= 2 sets of >= 8.6 GB) of other
  data, far beyond the H200's L2 (60 MiB as torch reports it; 50 MB in NVIDIA's figures),
  so every call reads its K/V from HBM.

  Bytes and bandwidth. kv_bytes = K + V bytes of one call = 2 * B * 8 * L * 128 * 2 (q and
  the output, B*32*128*2 each, are left out: < 0.1% at L >= 4096). gbps = kv_bytes /
  median time / 1e9. The H200's HBM3e peak is 4.8 TB/s (tools/plot_gpu_bench.py divides
  by it).

  Correctness. For each backend, on the first buffer set of shapes with K+V <= 256 MB, the
  output is compared with an FP32 reference (einsum + softmax on the BF16 inputs); the max
  abs error and its ratio to max |reference| go into the note (BF16 output rounding gives
  rel ~ 4e-3; rel >= 0.05, e.g. a wrong GQA head mapping, adds "WRONG").

OUTPUT
  CSV at --out: backend, batch, ctx, q_heads, kv_heads, head_dim, median_us, p10_us,
  p90_us, kv_bytes, gbps, note (empty times for unsupported/skipped rows). Beside it,
  <out>.json: torch / CUDA / cuDNN versions, device, settings. A table on stdout.
  --quick: B in {1, 16, 64}, L in {4096, 32768, 131072}, 20 runs. --budget-s (default 170):
  shapes not reached in time get rows with note "skipped: time budget".

Exit status: 0 done (unsupported rows included), 2 bad usage, 3 no CUDA device, 77 torch
not installed.
"""
import argparse
import csv
import datetime
import json
import math
import os
import platform
import re
import statistics
import sys
import time
import warnings

PROG = "sdpa_bench"

Q_HEADS = 32
KV_HEADS = 8
HEAD_DIM = 128
ELEM_BYTES = 2  # bf16
BATCHES = [1, 4, 16, 32, 64]
CTXS = [4096, 8192, 16384, 32768, 65536, 131072]
QUICK_BATCHES = [1, 16, 64]
QUICK_CTXS = [4096, 32768, 131072]
# --issue-grid: issue #22's decode grid, every batch 1..64 at 4K..128K plus batch 1-2 at 256K
# and 1M (lowp gpu bench runs the same shapes; tools/flashinfer_bench.py takes the option too)
ISSUE_SHAPES = ([(b, c) for b in (1, 2, 4, 8, 16, 32, 64) for c in CTXS]
                + [(b, c) for b in (1, 2) for c in (262144, 1048576)])
ROTATE_MIN_BYTES = 256 << 20  # rotation total, >> 50 MB L2
ROTATE_MIN_SETS = 4
CHECK_MAX_BYTES = 256 << 20  # correctness check only on shapes this small
COLUMNS = ["backend", "batch", "ctx", "q_heads", "kv_heads", "head_dim", "median_us",
           "p10_us", "p90_us", "kv_bytes", "gbps", "note"]
BACKENDS = ["cudnn", "flash", "efficient"]  # names in the CSV
BACKEND_ENUM = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION",
                "efficient": "EFFICIENT_ATTENTION"}


def log(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def kv_bytes_of(b, ctx):
    return 2 * b * KV_HEADS * ctx * HEAD_DIM * ELEM_BYTES


def set_bytes_of(b, ctx):
    q = b * Q_HEADS * HEAD_DIM * ELEM_BYTES
    return kv_bytes_of(b, ctx) + 2 * q  # q and the output buffer


def n_sets(b, ctx, mem_bytes):
    """Buffer sets to rotate over: >= 4 and >= 256 MB in all, within the memory budget."""
    sb = set_bytes_of(b, ctx)
    want = max(ROTATE_MIN_SETS, math.ceil(ROTATE_MIN_BYTES / sb))
    fit = int(mem_bytes // sb)
    return max(1, min(want, fit))


def plan(args):
    batches = args.batch or (QUICK_BATCHES if args.quick else BATCHES)
    ctxs = args.ctx or (QUICK_CTXS if args.quick else CTXS)
    shapes = list(ISSUE_SHAPES) if args.issue_grid else [(b, c) for b in batches for c in ctxs]
    # Small shapes first: a run cut by the budget still covers every batch at short contexts.
    shapes.sort(key=lambda s: (kv_bytes_of(*s), s))
    return shapes


def warning_reasons(caught, limit=240):
    """The reasons torch gave (TORCH_WARN) for refusing a kernel, as one short line: header
    lines ("... not used because:") and "(Triggered internally at ...)" are dropped."""
    out = []
    for w in caught:
        for line in str(w.message).splitlines():
            line = re.sub(r"\s*\(Triggered internally at [^)]*\)", "", line).strip(" ()")
            if not line or line.endswith("because:") or line in out:
                continue
            out.append(line)
    text = " / ".join(out)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_line(text):
    for line in str(text).splitlines():
        line = line.strip()
        if line:
            return line
    return str(text).strip()


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="sdpa_bench.py",
        description="PyTorch SDPA decode (BF16 KV, GQA 32/8, d=128) per backend: the peer "
                    "for lowp's decode kernels. See the header of this file for what is measured.")
    p.add_argument("--out", help="CSV output path (required unless --dry-run)")
    p.add_argument("--quick", action="store_true", help="fewer shapes (B 1,16,64; L 4K,32K,128K), 20 runs")
    p.add_argument("--runs", type=int, default=None, help="timed calls per backend and shape (default 30; --quick 20)")
    p.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help="comma list of cudnn, flash, efficient (default all three)")
    p.add_argument("--batch", type=int, action="append", help="batch size (repeatable; overrides the grid)")
    p.add_argument("--ctx", type=int, action="append", help="context length (repeatable; overrides the grid)")
    p.add_argument("--issue-grid", action="store_true",
                   help="issue #22's grid: batch 1,2,4,..,64 x 4K..128K, batch 1-2 x 256K and 1M")
    p.add_argument("--gqa", choices=["auto", "native", "fold"], default="auto",
                   help="auto: enable_gqa=True, else fold the query heads (default); native / fold: only that")
    p.add_argument("--max-kv-gb", type=float, default=60.0, help="skip shapes whose K+V exceed this (default 60)")
    p.add_argument("--mem-gb", type=float, default=100.0, help="GPU memory for the rotating buffer sets (default 100)")
    p.add_argument("--budget-s", type=float, default=170.0, help="wall-time budget in seconds (default 170)")
    p.add_argument("--seed", type=int, default=0x6C6F7770)
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit (no torch needed)")
    args = p.parse_args(argv)
    if args.runs is None:
        args.runs = 20 if args.quick else 30
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    if args.runs < 20:
        log(f"warning: --runs {args.runs} < 20: medians are less stable than the project's standard")
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    bad = [b for b in args.backends if b not in BACKENDS]
    if bad or not args.backends:
        p.error(f"--backends: unknown {bad}; choose from {BACKENDS}")
    for v in (args.batch or []) + (args.ctx or []):
        if v <= 0:
            p.error("--batch / --ctx must be positive")
    if args.issue_grid and (args.batch or args.ctx or args.quick):
        p.error("--issue-grid takes no --batch, --ctx or --quick")
    if not args.dry_run and not args.out:
        p.error("--out is required (or --dry-run)")
    return args


def print_plan(args, shapes):
    mem = args.mem_gb * 1e9
    print(f"{'batch':>5} {'ctx':>7} {'kv_MB':>9} {'sets':>4} {'rotation_MB':>11}  note")
    for b, ctx in shapes:
        kvb = kv_bytes_of(b, ctx)
        if kvb > args.max_kv_gb * 1e9:
            print(f"{b:5d} {ctx:7d} {kvb / 1e6:9.1f} {'-':>4} {'-':>11}  skipped: K+V > {args.max_kv_gb:g} GB")
            continue
        n = n_sets(b, ctx, mem)
        print(f"{b:5d} {ctx:7d} {kvb / 1e6:9.1f} {n:4d} {n * set_bytes_of(b, ctx) / 1e6:11.1f}")
    print(f"backends: {', '.join(args.backends)}; gqa: {args.gqa}; runs {args.runs}, warmup {args.warmup}; "
          f"budget {args.budget_s:g} s")


# ---------------------------------------------------------------------------- GPU part


def make_row(backend, b, ctx, times_us=None, note=""):
    row = {"backend": backend, "batch": b, "ctx": ctx, "q_heads": Q_HEADS, "kv_heads": KV_HEADS,
           "head_dim": HEAD_DIM, "median_us": "", "p10_us": "", "p90_us": "",
           "kv_bytes": kv_bytes_of(b, ctx), "gbps": "", "note": note}
    if times_us:
        ts = sorted(times_us)
        med = statistics.median(ts)
        q = statistics.quantiles(ts, n=10, method="inclusive") if len(ts) >= 2 else [ts[0]] * 9
        row["median_us"] = f"{med:.2f}"
        row["p10_us"] = f"{q[0]:.2f}"
        row["p90_us"] = f"{q[8]:.2f}"
        row["gbps"] = f"{kv_bytes_of(b, ctx) / (med * 1e-6) / 1e9:.1f}"
    return row


class Bench:
    def __init__(self, args, torch):
        self.args = args
        self.torch = torch
        self.F = torch.nn.functional
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.sdpa_kernel = sdpa_kernel
        self.enum = {}
        for name in args.backends:
            e = getattr(SDPBackend, BACKEND_ENUM[name], None)
            self.enum[name] = e
        self.dev = torch.device("cuda")
        self.cycles_per_ms = self._calibrate_sleep()
        self.sleep_ms = 20.0

    def _calibrate_sleep(self):
        torch = self.torch
        if not hasattr(torch.cuda, "_sleep"):
            log("warning: torch.cuda._sleep missing: timed calls are not queued behind a sleep")
            return None
        cycles = 10_000_000
        torch.cuda._sleep(cycles)  # load the kernel
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        torch.cuda._sleep(cycles)
        e.record()
        e.synchronize()
        ms = s.elapsed_time(e)
        return cycles / ms if ms > 0 else None

    def alloc(self, b, ctx, n):
        torch = self.torch
        sets = []
        for _ in range(n):
            q = torch.empty(b, Q_HEADS, 1, HEAD_DIM, device=self.dev, dtype=torch.bfloat16).normal_()
            k = torch.empty(b, KV_HEADS, ctx, HEAD_DIM, device=self.dev, dtype=torch.bfloat16).normal_()
            v = torch.empty(b, KV_HEADS, ctx, HEAD_DIM, device=self.dev, dtype=torch.bfloat16).normal_()
            sets.append((q, k, v))
        torch.cuda.synchronize()
        return sets

    def call(self, mode, q, k, v):
        """One SDPA call. native: output [B, 32, 1, 128]; fold: [B, 8, 4, 128] (head 4g+r is
        [:, g, r]), left as SDPA returns it: a reshape could copy, and would be timed."""
        if mode == "native":
            return self.F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        # fold: the query heads of one KV head become its query rows (a view, no copy)
        qf = q.view(q.shape[0], KV_HEADS, Q_HEADS // KV_HEADS, HEAD_DIM)
        return self.F.scaled_dot_product_attention(qf, k, v)

    def try_mode(self, backend, mode, qkv):
        """Run once under the backend; None if it ran, else the reason it refused."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with self.sdpa_kernel([self.enum[backend]]):
                    self.call(mode, *qkv)
                self.torch.cuda.synchronize()
                return None
            except (RuntimeError, ValueError, TypeError, NotImplementedError) as ex:
                why = first_line(ex)
                reasons = warning_reasons(caught)
                return f"{why} ({reasons})" if reasons else why

    def check(self, backend, mode, qkv):
        """Max abs error against an FP32 reference on these inputs, and that over max |ref|."""
        torch = self.torch
        q, k, v = qkv
        b = q.shape[0]
        with self.sdpa_kernel([self.enum[backend]]):
            out = self.call(mode, q, k, v).float()
        g = Q_HEADS // KV_HEADS
        qg = q.float().view(b, KV_HEADS, g, HEAD_DIM)  # head h -> KV head h // g
        s = torch.einsum("bhgd,bhld->bhgl", qg, k.float()) / math.sqrt(HEAD_DIM)
        ref = torch.einsum("bhgl,bhld->bhgd", torch.softmax(s, dim=-1), v.float())
        err = (out.reshape(b, KV_HEADS, g, HEAD_DIM) - ref).abs().max().item()
        return err, err / max(ref.abs().max().item(), 1e-30)

    def time_calls(self, backend, mode, sets):
        torch = self.torch
        args = self.args
        n = len(sets)
        with self.sdpa_kernel([self.enum[backend]]):
            for i in range(args.warmup):
                self.call(mode, *sets[i % n])
            torch.cuda.synchronize()
            note = "" if self.cycles_per_ms else "no-sleep"
            for _attempt in range(4):
                starts = [torch.cuda.Event(enable_timing=True) for _ in range(args.runs)]
                ends = [torch.cuda.Event(enable_timing=True) for _ in range(args.runs)]
                gate = torch.cuda.Event()
                if self.cycles_per_ms:
                    torch.cuda._sleep(int(self.sleep_ms * self.cycles_per_ms))
                gate.record()
                t0 = time.perf_counter()
                for i in range(args.runs):
                    qkv = sets[(i + args.warmup) % n]
                    starts[i].record()
                    self.call(mode, *qkv)
                    ends[i].record()
                enqueue_ms = (time.perf_counter() - t0) * 1e3
                still_sleeping = not gate.query()
                torch.cuda.synchronize()
                if still_sleeping or not self.cycles_per_ms:
                    break
                # The GPU caught up with the CPU: there were gaps. Sleep longer, retry.
                self.sleep_ms = max(2 * self.sleep_ms, 2 * enqueue_ms)
            else:
                note = "cpu-gap"  # never got ahead in 4 tries: times may include launch gaps
        times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
        return times, note


def run(args):
    try:
        import torch
    except ImportError:
        log("torch is not installed: nothing to measure")
        return 77
    if not torch.cuda.is_available():
        log("no CUDA device")
        return 3
    shapes = plan(args)
    t_start = time.monotonic()
    torch.manual_seed(args.seed)
    bench = Bench(args, torch)
    missing = [b for b in args.backends if bench.enum[b] is None]
    props = torch.cuda.get_device_properties(0)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": props.name,
        "device_memory_gb": round(props.total_memory / 1e9, 1),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "backends": args.backends,
        "gqa": args.gqa,
        "runs": args.runs,
        "warmup": args.warmup,
        "mem_gb": args.mem_gb,
        "quick": args.quick,
        "shape": f"q [B,{Q_HEADS},1,{HEAD_DIM}] bf16, K/V [B,{KV_HEADS},L,{HEAD_DIM}] bf16",
        "l2_bytes": getattr(props, "L2_cache_size", None),
        "rotation_min_bytes": ROTATE_MIN_BYTES,
        "sleep_cycles_per_ms": bench.cycles_per_ms,
    }
    log(f"{props.name}, torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {meta['cudnn']}")

    rows = []
    with torch.inference_mode():
        for b, ctx in shapes:
            kvb = kv_bytes_of(b, ctx)
            if kvb > args.max_kv_gb * 1e9:
                for be in args.backends:
                    rows.append(make_row(be, b, ctx, note=f"skipped: K+V {kvb / 1e9:.1f} GB > {args.max_kv_gb:g} GB"))
                continue
            if time.monotonic() - t_start > args.budget_s:
                for be in args.backends:
                    rows.append(make_row(be, b, ctx, note="skipped: time budget"))
                continue
            n = n_sets(b, ctx, args.mem_gb * 1e9)
            try:
                sets = bench.alloc(b, ctx, n)
            except torch.cuda.OutOfMemoryError as ex:
                for be in args.backends:
                    rows.append(make_row(be, b, ctx, note=f"skipped: out of memory ({first_line(ex)[:80]})"))
                continue
            for be in args.backends:
                if be in missing:
                    rows.append(make_row(be, b, ctx, note=f"unsupported: SDPBackend.{BACKEND_ENUM[be]} not in this torch"))
                    continue
                modes = {"native": ["native"], "fold": ["fold"], "auto": ["native", "fold"]}[args.gqa]
                refused = {}
                mode = None
                for m in modes:
                    why = bench.try_mode(be, m, sets[0])
                    if why is None:
                        mode = m
                        break
                    refused[m] = why
                if mode is None:
                    why = "; ".join(f"{m}: {w}" for m, w in refused.items())
                    rows.append(make_row(be, b, ctx, note=f"unsupported: {why}"))
                    log(f"{be:9s} B={b:<3d} L={ctx:<6d} unsupported: {why}")
                    continue
                notes = ["enable_gqa" if mode == "native" else "fold q->[B,8,4,128]"]
                if "native" in refused:
                    notes.append(f"enable_gqa refused: {refused['native']}")
                if kvb <= CHECK_MAX_BYTES:
                    err, rel = bench.check(be, mode, sets[0])
                    notes.append(f"maxerr {err:.1e} rel {rel:.1e}" + (" WRONG" if not rel < 0.05 else ""))
                try:
                    times, tnote = bench.time_calls(be, mode, sets)
                except (RuntimeError, torch.cuda.OutOfMemoryError) as ex:
                    rows.append(make_row(be, b, ctx, note=f"unsupported: {first_line(ex)}"))
                    continue
                if tnote:
                    notes.append(tnote)
                notes.append(f"{n} sets")
                row = make_row(be, b, ctx, times, "; ".join(notes))
                rows.append(row)
                log(f"{be:9s} B={b:<3d} L={ctx:<6d} {row['median_us']:>10s} us {row['gbps']:>7s} GB/s  {row['note']}")
            del sets
            torch.cuda.empty_cache()

    meta["elapsed_s"] = round(time.monotonic() - t_start, 1)
    write_csv(args.out, rows)
    with open(args.out + ".json", "w") as f:
        json.dump(meta, f, indent=2)
    print_table(rows)
    log(f"{len(rows)} rows in {meta['elapsed_s']} s -> {args.out} (+ .json)")
    return 0


def write_csv(path, rows):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def print_table(rows):
    print(f"{'backend':9s} {'B':>3s} {'ctx':>7s} {'median_us':>10s} {'p10_us':>9s} {'p90_us':>9s} "
          f"{'kv_MB':>9s} {'GB/s':>7s}  note")
    for r in sorted(rows, key=lambda r: (r["backend"], r["batch"], r["ctx"])):
        print(f"{r['backend']:9s} {r['batch']:3d} {r['ctx']:7d} {r['median_us']:>10s} {r['p10_us']:>9s} "
              f"{r['p90_us']:>9s} {r['kv_bytes'] / 1e6:9.1f} {r['gbps']:>7s}  {r['note']}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.dry_run:
        print_plan(args, plan(args))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
