#!/usr/bin/env python3
"""tools/flashinfer_bench.py: FlashInfer's paged decode and prefill on BF16 and FP8 KV caches,
the production peer for lowp's decode and extend kernels (issue #22).

    python3 tools/flashinfer_bench.py --out fi-decode.csv --extend-out fi-extend.csv [--quick]
    python3 tools/flashinfer_bench.py --dry-run      (the plan only; needs no torch, no GPU)

WHAT IS MEASURED
  Decode: flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD",
  use_tensor_cores=True), as vLLM's FlashInfer backend builds it for GQA models: its plan()
  picks the FA2 batch-prefill kernel (q_len 1 per request; BF16 q with FP8 KV never takes the
  FA3 path, which needs FP8 q). q [B, 32, 128] BF16, one token per request; the cache one
  tensor [pages, 2, 16, 8, 128] (K and V of a page side by side, page size 16, 8 KV heads,
  head dim 128, NHD), BF16 or FP8 E4M3 with k_scale = v_scale = 1 (the per-tensor scales
  vLLM passes). B in {1,4,16,32,64}, L in {4K ... 1M} (--issue-grid: sdpa_bench.py's
  ISSUE_SHAPES, issue #22's 46 shapes); shapes whose K+V exceed --max-kv-gb
  (60) are skipped. Each request's pages are a random permutation of the cache's pages (a
  paged cache after allocation churn, not one contiguous run). Columns as tools/sdpa_bench.py
  (backend flashinfer-tc-bf16 / flashinfer-tc-fp8); kv_bytes counts the cache bytes read
  (1 byte a value for FP8, 2 for BF16), gbps = kv_bytes / median.

  Prefill / extend: flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD",
  backend="fa2"), one request: a chunk of C BF16 queries over a paged cache of P + C tokens,
  causal=True (FlashInfer aligns the causal mask bottom-right: query i sits at P + i), the
  shapes of tools/sdpa_extend_bench.py (C x P), FP8 KV (--extend-kv fp8, the default) and/or
  BF16 KV (fa2 forced: "auto" would take FA3 for BF16 on the H200, a module the bundle does
  not build). Columns as tools/sdpa_extend_bench.py (backend flashinfer-fa2-fp8/-bf16),
  TFLOP/s by its pairs() convention.

  Time: tools/sdpa_bench.py's discipline, by its own code (Bench.time_calls): --warmup calls,
  then --runs (20) timed calls queued behind a GPU sleep, CUDA events around each, rotating
  over buffer sets of >= 256 MB in all (each set its own cache, q and output; one plan per
  shape, host-side and untimed, since every set has the same page table); median, p10, p90.
  The JIT: the first plan+run of each module builds or loads it; that is done once up front
  for the formats asked for and timed ("jit_s" in the .json), outside --budget-s.

  Correctness: on shapes with K+V <= 256 MB (decode) or C x (P + C) <= 2^24 score entries
  (extend), the output of the first set is compared with an FP32 reference on the same
  (dequantized) cache: max abs error and its ratio to max |reference| in the note; rel >= 0.05
  (a wrong head mapping, page table or scale) adds "WRONG". The reference rounds nothing but
  the inputs, so BF16 output rounding (~4e-3 rel) and FP8 P rounding in the FP8 kernel are
  what separates them.

Exit status: 0 done (unsupported rows included), 2 bad usage, 77 torch or flashinfer does not
import or no CUDA device (nothing measured).
"""
import argparse
import contextlib
import csv
import datetime
import json
import math
import os
import platform
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sdpa_bench as sb  # noqa: E402 - the shared timing discipline, grid and row format
from sdpa_extend_bench import pairs  # noqa: E402 - the issue's TFLOP/s convention

PROG = "flashinfer_bench"
Q_HEADS, KV_HEADS, HEAD_DIM, PAGE = sb.Q_HEADS, sb.KV_HEADS, sb.HEAD_DIM, 16
CTXS = [4096, 8192, 16384, 32768, 65536, 131072, 262144, 524288, 1048576]
QUICK_CTXS = [4096, 32768, 131072, 1048576]
CHUNKS = [512, 1024, 2048, 4096, 8192]
PREFIXES = [0, 4096, 16384, 32768, 131072]
KV_FORMATS = {"bf16": 2, "fp8": 1}  # bytes per stored value
WORKSPACE_BYTES = 512 << 20  # split-KV partial outputs; plan() refuses if it is too small
EXT_CHECK_MAX = 1 << 24  # C x (P + C) score entries of the extend reference (x 32 heads x 4 B)
EXT_COLUMNS = ["backend", "chunk", "prefix", "q_heads", "kv_heads", "head_dim", "median_us",
               "tflops", "note"]


def log(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def kv_bytes(b, tokens, fmt):
    return 2 * b * KV_HEADS * tokens * HEAD_DIM * KV_FORMATS[fmt]


def n_sets(set_bytes, mem_bytes):
    """As sdpa_bench.n_sets: >= 4 sets and >= 256 MB in all, within the memory budget."""
    want = max(sb.ROTATE_MIN_SETS, math.ceil(sb.ROTATE_MIN_BYTES / set_bytes))
    return max(1, min(want, int(mem_bytes // set_bytes)))


def csv_list(text, what, minimum):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{what} takes comma-separated integers, not {text!r}") from None
    if not vals or min(vals) < minimum:
        raise ValueError(f"{what} must be integers >= {minimum}")
    return vals


def fmt_list(text, what):
    vals = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in vals if x not in KV_FORMATS]
    if bad:
        raise ValueError(f"{what}: unknown {bad}; choose from {sorted(KV_FORMATS)}")
    return vals


def parse_args(argv):
    p = argparse.ArgumentParser(prog="flashinfer_bench.py",
                                description="FlashInfer paged decode / prefill (BF16 and FP8 KV) "
                                            "on the shapes of sdpa_bench.py and sdpa_extend_bench.py")
    p.add_argument("--out", help="decode CSV (required unless --dry-run or --no-decode)")
    p.add_argument("--extend-out", help="prefill/extend CSV (none: no extend run)")
    p.add_argument("--no-decode", action="store_true", help="only the extend shapes")
    p.add_argument("--quick", action="store_true", help="B 1,16,64; L 4K,32K,128K,1M; extend 512,4096 x 0,32K")
    p.add_argument("--kv", default="bf16,fp8", help="decode KV formats (default bf16,fp8)")
    p.add_argument("--extend-kv", default="fp8", help="extend KV formats (default fp8)")
    p.add_argument("--batch", type=int, action="append", help="decode batch (repeatable; overrides the grid)")
    p.add_argument("--ctx", type=int, action="append", help="decode context (repeatable; overrides the grid)")
    p.add_argument("--issue-grid", action="store_true",
                   help="decode on sdpa_bench.py's --issue-grid shapes (issue #22's grid)")
    p.add_argument("--chunks", default=None, help="extend chunk lengths (default 512,...,8192)")
    p.add_argument("--prefixes", default=None, help="extend prefixes (default 0,...,131072)")
    p.add_argument("--runs", type=int, default=20, help="timed calls per shape (default 20)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--max-kv-gb", type=float, default=60.0)
    p.add_argument("--mem-gb", type=float, default=100.0, help="GPU memory for the rotating sets")
    p.add_argument("--budget-s", type=float, default=240.0, help="wall time after the JIT (default 240)")
    p.add_argument("--seed", type=int, default=0x6C6F7770)
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    if a.runs < 1 or a.warmup < 0:
        p.error("--runs must be >= 1 and --warmup >= 0")
    for v in (a.batch or []) + (a.ctx or []):
        if v <= 0:
            p.error("--batch / --ctx must be positive")
    if a.issue_grid and (a.batch or a.ctx or a.quick):
        p.error("--issue-grid takes no --batch, --ctx or --quick")
    for v in a.ctx or []:
        if v % PAGE:
            p.error(f"--ctx must be a multiple of the page size {PAGE}")
    try:  # bad lists: argparse's one-line error, exit 2
        a.kv = fmt_list(a.kv, "--kv")
        a.extend_kv = fmt_list(a.extend_kv, "--extend-kv")
        a.chunks = csv_list(a.chunks, "--chunks", 1) if a.chunks else ([512, 4096] if a.quick else CHUNKS)
        a.prefixes = (csv_list(a.prefixes, "--prefixes", 0) if a.prefixes
                      else ([0, 32768] if a.quick else PREFIXES))
    except ValueError as ex:
        p.error(str(ex))
    if not a.dry_run and not a.no_decode and not a.out:
        p.error("--out is required (or --dry-run, or --no-decode with --extend-out)")
    if not a.dry_run and a.no_decode and not a.extend_out:
        p.error("--no-decode needs --extend-out")
    return a


def decode_plan(a):
    if a.no_decode:
        return []
    batches = a.batch or (sb.QUICK_BATCHES if a.quick else sb.BATCHES)
    ctxs = a.ctx or (QUICK_CTXS if a.quick else CTXS)
    bc = sb.ISSUE_SHAPES if a.issue_grid else [(b, c) for b in batches for c in ctxs]
    shapes = [(fmt, b, c) for b, c in bc for fmt in a.kv]
    shapes.sort(key=lambda s: (kv_bytes(s[1], s[2], s[0]), s))  # small first, as sdpa_bench
    return shapes


def extend_plan(a):
    if not a.extend_out:
        return []
    return [(fmt, c, p) for c in a.chunks for p in a.prefixes for fmt in a.extend_kv]


def print_plan(a):
    for fmt, b, c in decode_plan(a):
        kvb = kv_bytes(b, c, fmt)
        skip = "  skipped: K+V > %g GB" % a.max_kv_gb if kvb > a.max_kv_gb * 1e9 else ""
        print(f"decode flashinfer-tc-{fmt:4s} B={b:<3d} L={c:<8d} kv {kvb / 1e6:10.1f} MB{skip}")
    for fmt, c, p in extend_plan(a):
        print(f"extend flashinfer-fa2-{fmt:4s} chunk {c:<5d} prefix {p:<7d} {pairs(c, p)} visible pairs")
    print(f"runs {a.runs}, warmup {a.warmup}; budget {a.budget_s:g} s after the JIT")


# ---------------------------------------------------------------------------- GPU part


class Timer(sb.Bench):
    """sdpa_bench.Bench's sleep-gated timing for any call: the "mode" handed to time_calls is
    the function to time, each buffer set its arguments; no SDPA backend is forced."""

    def __init__(self, a, torch):
        super().__init__(types.SimpleNamespace(backends=[], runs=a.runs, warmup=a.warmup), torch)
        self.sdpa_kernel = lambda _backends: contextlib.nullcontext()
        self.enum = {"flashinfer": None}

    def call(self, mode, *args):
        return mode(*args)


class Runner:
    def __init__(self, a, torch, flashinfer):
        self.a, self.torch, self.fi = a, torch, flashinfer
        self.dev = torch.device("cuda")
        self.dtype = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
        self.ws = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=self.dev)
        self.timer = Timer(a, torch)
        self.gen = torch.Generator(device="cpu").manual_seed(a.seed)

    def pages(self, b, tokens):
        """Page table of b requests of `tokens` tokens each, over a shuffled pool."""
        torch = self.torch
        per = -(-tokens // PAGE)
        indptr = torch.arange(0, (b + 1) * per, per, dtype=torch.int32)
        indices = torch.randperm(b * per, generator=self.gen).to(torch.int32)
        last = torch.full((b,), tokens - (per - 1) * PAGE, dtype=torch.int32)
        return indptr.to(self.dev), indices.to(self.dev), last.to(self.dev), b * per

    def cache(self, n_pages, fmt):
        """A cache of standard normal values in this format, filled 2048 pages (64 MB of BF16)
        at a time, so that an FP8 cache needs no BF16 copy of itself beside it."""
        torch = self.torch
        c = torch.empty(n_pages, 2, PAGE, KV_HEADS, HEAD_DIM, device=self.dev, dtype=self.dtype[fmt])
        for s in range(0, n_pages, 2048):
            part = c[s:s + 2048]
            part.copy_(torch.empty(part.shape, device=self.dev, dtype=torch.bfloat16).normal_())
        return c

    def decode_wrapper(self, b, tokens, fmt):
        w = self.fi.BatchDecodeWithPagedKVCacheWrapper(self.ws, "NHD", use_tensor_cores=True)
        indptr, indices, last, n_pages = self.pages(b, tokens)
        w.plan(indptr, indices, last, Q_HEADS, KV_HEADS, HEAD_DIM, PAGE, pos_encoding_mode="NONE",
               q_data_type=self.torch.bfloat16, kv_data_type=self.dtype[fmt])
        return w, (indptr, indices, last), n_pages

    def extend_wrapper(self, c, p, fmt):
        torch = self.torch
        w = self.fi.BatchPrefillWithPagedKVCacheWrapper(self.ws, "NHD", backend="fa2")
        indptr, indices, last, n_pages = self.pages(1, p + c)
        qo = torch.tensor([0, c], dtype=torch.int32, device=self.dev)
        w.plan(qo, indptr, indices, last, Q_HEADS, KV_HEADS, HEAD_DIM, PAGE, causal=True,
               q_data_type=torch.bfloat16, kv_data_type=self.dtype[fmt])
        return w, (indptr, indices, last), n_pages

    @staticmethod
    def run_fn(w, fmt):
        if fmt == "bf16":
            return lambda q, kv, out: w.run(q, kv, out=out)
        return lambda q, kv, out: w.run(q, kv, k_scale=1.0, v_scale=1.0, out=out)

    def gather(self, kv, table, b, tokens):
        """K, V of each request as [b, tokens, 8, 128] float32, through the page table."""
        indptr, indices, _ = table
        per = int(indptr[1].item())
        # gathered as raw bytes (indexing is not defined for every float8 type), then widened
        raw = kv.view(self.torch.uint8 if kv.element_size() == 1 else self.torch.int16)
        pages = raw[indices.long().view(b, per)].view(kv.dtype).float()  # [b, per, 2, 16, 8, 128]
        k = pages[:, :, 0].reshape(b, per * PAGE, KV_HEADS, HEAD_DIM)[:, :tokens]
        v = pages[:, :, 1].reshape(b, per * PAGE, KV_HEADS, HEAD_DIM)[:, :tokens]
        return k, v

    def reference(self, q, k, v, prefix):
        """FP32 attention: q [b, n, 32, 128], k/v [b, L, 8, 128]; query i at position prefix + i
        sees keys 0..prefix+i (n = 1, prefix = L - 1: plain decode)."""
        torch = self.torch
        g = Q_HEADS // KV_HEADS
        b, n = q.shape[0], q.shape[1]
        qg = q.float().view(b, n, KV_HEADS, g, HEAD_DIM)  # head h -> KV head h // g
        s = torch.einsum("bnhgd,blhd->bhgnl", qg, k) / math.sqrt(HEAD_DIM)
        pos = torch.arange(n, device=q.device).view(n, 1) + prefix
        s = s.masked_fill(torch.arange(k.shape[1], device=q.device).view(1, -1) > pos, float("-inf"))
        o = torch.einsum("bhgnl,blhd->bnhgd", torch.softmax(s, dim=-1), v)
        return o.reshape(b, n, Q_HEADS, HEAD_DIM)

    def check_note(self, out, ref):
        err = (out.float() - ref).abs().max().item()
        rel = err / max(ref.abs().max().item(), 1e-30)
        return f"maxerr {err:.1e} rel {rel:.1e}" + ("" if rel < 0.05 else " WRONG")

    def jit(self, decode_fmts, extend_fmts):
        """Build or load every module asked for on a tiny shape; seconds per module."""
        times = {}
        for kind, fmts in (("decode", decode_fmts), ("extend", extend_fmts)):
            for fmt in fmts:
                t = time.monotonic()
                try:
                    if kind == "decode":
                        w, _, n_pages = self.decode_wrapper(1, PAGE, fmt)
                        q = self.torch.zeros(1, Q_HEADS, HEAD_DIM, device=self.dev, dtype=self.torch.bfloat16)
                    else:
                        w, _, n_pages = self.extend_wrapper(PAGE, 0, fmt)
                        q = self.torch.zeros(PAGE, Q_HEADS, HEAD_DIM, device=self.dev, dtype=self.torch.bfloat16)
                    self.run_fn(w, fmt)(q, self.cache(n_pages, fmt), self.torch.empty_like(q))
                    self.torch.cuda.synchronize()
                    times[f"{kind}-{fmt}"] = round(time.monotonic() - t, 1)
                except Exception as ex:  # noqa: BLE001 - reported per row, the rest still runs
                    times[f"{kind}-{fmt}"] = f"failed: {sb.first_line(ex)[:200]}"
                log(f"module {kind}-{fmt}: {times[f'{kind}-{fmt}']}")
        return times

    def bench(self, row, make, fmt, q_rows, b, tokens, prefix, check, notes):
        """Time one shape: make() plans it (decode_wrapper or extend_wrapper: wrapper, page
        table, pages); each set is q [q_rows, 32, 128], its own cache, an output. The first
        set is checked against the reference when `check`; q_rows = b x (queries per request)."""
        a, torch = self.a, self.torch
        set_b = kv_bytes(b, tokens, fmt) + 2 * q_rows * Q_HEADS * HEAD_DIM * 2
        n = n_sets(set_b, a.mem_gb * 1e9)
        sets = []
        try:
            w, table, n_pages = make()
            for _ in range(n):
                q = torch.empty(q_rows, Q_HEADS, HEAD_DIM, device=self.dev, dtype=torch.bfloat16).normal_()
                sets.append((q, self.cache(n_pages, fmt), torch.empty_like(q)))
            torch.cuda.synchronize()
            fn = self.run_fn(w, fmt)
            if check:
                q, kv, out = sets[0]
                fn(q, kv, out)
                k, v = self.gather(kv, table, b, tokens)
                ref = self.reference(q.view(b, q_rows // b, Q_HEADS, HEAD_DIM), k, v, prefix)
                notes.append(self.check_note(out, ref.reshape(q_rows, Q_HEADS, HEAD_DIM)))
                del k, v, ref
            times, tnote = self.timer.time_calls("flashinfer", fn, sets)
            if tnote:
                notes.append(tnote)
            notes.append(f"{n} sets")
            return row(times, "; ".join(notes))
        except torch.cuda.OutOfMemoryError as ex:
            return row(note=f"skipped: out of memory ({sb.first_line(ex)[:80]})")
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as ex:
            return row(note=f"unsupported: {sb.first_line(ex)[:200]}")
        finally:
            del sets
            torch.cuda.empty_cache()

    def refused(self, row, jit, key, t0):
        """The row for a shape not run (its module failed, or the budget is spent), else None."""
        if not isinstance(jit.get(key), float):
            return row(note=f"unsupported: module {jit.get(key)}")
        if time.monotonic() - t0 > self.a.budget_s:
            return row(note="skipped: time budget")
        return None

    def decode_row(self, fmt, b, ctx, t0, jit):
        name = f"flashinfer-tc-{fmt}"
        kvb = kv_bytes(b, ctx, fmt)

        def row(times=None, note=""):
            r = sb.make_row(name, b, ctx, times, note)
            r["kv_bytes"] = kvb  # make_row counts BF16 bytes; this format's
            if times:
                r["gbps"] = f"{kvb / (float(r['median_us']) * 1e-6) / 1e9:.1f}"
            return r

        if kvb > self.a.max_kv_gb * 1e9:
            return row(note=f"skipped: K+V {kvb / 1e9:.1f} GB > {self.a.max_kv_gb:g} GB")
        return self.refused(row, jit, f"decode-{fmt}", t0) or self.bench(
            row, lambda: self.decode_wrapper(b, ctx, fmt), fmt, b, b, ctx, ctx - 1,
            kvb <= sb.CHECK_MAX_BYTES, ["use_tensor_cores", "NHD page 16"])

    def extend_row(self, fmt, c, p, t0, jit):
        name = f"flashinfer-fa2-{fmt}"

        def row(times=None, note=""):
            if not times:
                return dict(zip(EXT_COLUMNS, [name, c, p, Q_HEADS, KV_HEADS, HEAD_DIM, "", "", note]))
            us = sorted(times)[len(times) // 2]
            tf = 4.0 * Q_HEADS * HEAD_DIM * pairs(c, p) / (us * 1e-6) / 1e12
            return dict(zip(EXT_COLUMNS, [name, c, p, Q_HEADS, KV_HEADS, HEAD_DIM, f"{us:.2f}",
                                          f"{tf:.2f}", note]))

        return self.refused(row, jit, f"extend-{fmt}", t0) or self.bench(
            row, lambda: self.extend_wrapper(c, p, fmt), fmt, c, 1, p + c, p,
            c * (p + c) <= EXT_CHECK_MAX, ["causal bottom-right", "NHD page 16"])


def write_rows(path, columns, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def run(a):
    try:
        import torch
    except ImportError as ex:
        log(f"torch does not import ({ex}): nothing to measure")
        return 77
    try:
        import flashinfer
    except Exception as ex:  # noqa: BLE001 - any import failure: no FlashInfer here
        log(f"flashinfer does not import ({type(ex).__name__}: {sb.first_line(ex)[:200]}): skipped")
        return 77
    if not torch.cuda.is_available():
        log("no CUDA device: skipped")
        return 77
    props = torch.cuda.get_device_properties(0)
    log(f"{props.name}, torch {torch.__version__}, CUDA {torch.version.cuda}, flashinfer {flashinfer.__version__}")
    torch.manual_seed(a.seed)
    dplan, eplan = decode_plan(a), extend_plan(a)
    aot = os.path.join(os.path.dirname(flashinfer.__file__), "data", "aot")
    r = Runner(a, torch, flashinfer)
    t = time.monotonic()
    jit = r.jit(sorted({s[0] for s in dplan}), sorted({s[0] for s in eplan}))
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(), "device": props.name, "torch": torch.__version__,
        "cuda": torch.version.cuda, "flashinfer": flashinfer.__version__,
        "flashinfer_path": os.path.dirname(flashinfer.__file__),
        "jit_s": jit, "jit_total_s": round(time.monotonic() - t, 1),
        # prebuilt modules (tools/flashinfer_bundle.py --build): loaded, never compiled
        "aot_modules": sorted(os.listdir(aot)) if os.path.isdir(aot) else [],
        "runs": a.runs, "warmup": a.warmup, "mem_gb": a.mem_gb, "quick": a.quick,
        "workspace_bytes": WORKSPACE_BYTES, "page_size": PAGE,
        "sleep_cycles_per_ms": r.timer.cycles_per_ms,
    }
    t0 = time.monotonic()
    drows, erows = [], []
    with torch.inference_mode():
        for fmt, b, c in dplan:
            row = r.decode_row(fmt, b, c, t0, jit)
            drows.append(row)
            log(f"{row['backend']:18s} B={b:<3d} L={c:<8d} {row['median_us']:>10s} us {row['gbps']:>7s} GB/s  {row['note']}")
        for fmt, c, p in eplan:
            row = r.extend_row(fmt, c, p, t0, jit)
            erows.append(row)
            log(f"{row['backend']:18s} C={c:<5d} P={p:<7d} {row['median_us']:>10s} us {row['tflops']:>7s} TFLOP/s  {row['note']}")
    meta["elapsed_s"] = round(time.monotonic() - t0, 1)
    if a.out and dplan:
        write_rows(a.out, sb.COLUMNS, drows)
    if a.extend_out and eplan:
        write_rows(a.extend_out, EXT_COLUMNS, erows)
    with open((a.out or a.extend_out) + ".json", "w") as f:
        json.dump(meta, f, indent=2)
    if drows:
        sb.print_table(drows)
    for row in erows:
        print(f"{row['backend']:18s} {row['chunk']:6d} {row['prefix']:7d} {row['median_us']:>10s} "
              f"{row['tflops']:>8s}  {row['note']}")
    log(f"{len(drows)} decode + {len(erows)} extend rows in {meta['elapsed_s']} s (JIT {meta['jit_total_s']} s)")
    return 0


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if a.dry_run:
        print_plan(a)
        return 0
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
