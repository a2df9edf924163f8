#!/usr/bin/env python3
"""tools/sdpa_extend_bench.py: PyTorch SDPA causal prefill / extend on BF16 K/V, the peer for
lowp's extend kernel (lowp_gpu_extend_bench, the same shapes).

    python3 tools/sdpa_extend_bench.py --out sdpa-extend.csv [--chunks 512,2048] [--prefixes 0,4096]
    python3 tools/sdpa_extend_bench.py --dry-run        (the plan only; needs no torch, no GPU)

WHAT IS MEASURED
  torch.nn.functional.scaled_dot_product_attention, q [1, 32, C, 128] BF16 (a chunk of C
  queries), K and V [1, 8, P + C, 128] BF16 (prefix P, then the chunk), enable_gqa=True,
  default scale, under torch.inference_mode(). Each backend forced alone
  (torch.nn.attention.sdpa_kernel): CUDNN_ATTENTION, FLASH_ATTENTION, EFFICIENT_ATTENTION.

  The causal mask when q_len < kv_len. is_causal=True in SDPA aligns the mask to the TOP LEFT
  (query i sees keys 0..i), which is wrong for an extend, where query i sits at position
  P + i and must see keys 0..P+i. So: P = 0 (initial prefill) uses is_causal=True; P > 0 uses
  torch.nn.attention.bias.causal_lower_right(C, P + C) (the bottom-right alignment, which the
  flash and efficient backends run without materialising a mask). A backend that refuses it
  is run with an explicit boolean mask [C, P + C] (note "explicit mask"); one that refuses
  that too gives a row "unsupported: <error>".

  Time: CUDA events around each call, --warmup (3) calls first, then --runs (10) timed calls;
  the median. TFLOP/s = 4 x 32 x 128 x pairs / time, pairs = C (P + 1) + C (C - 1) / 2 (the
  visible query-key pairs; the issue's convention, as lowp_gpu_extend_bench).

OUTPUT
  CSV: backend, chunk, prefix, q_heads, kv_heads, head_dim, median_us, tflops, note.
  Exit 0; 77 when torch or CUDA is missing (with --dry-run: prints the plan, exit 0).
"""
import argparse
import sys


def pairs(c, p):
    return c * (p + 1) + c * (c - 1) // 2


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="sdpa-extend-bench.csv")
    ap.add_argument("--chunks", default="512,1024,2048,4096,8192")
    ap.add_argument("--prefixes", default="0,4096,16384,32768,131072")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    try:
        chunks = [int(x) for x in a.chunks.split(",")]
        prefixes = [int(x) for x in a.prefixes.split(",")]
    except ValueError:
        print("sdpa_extend_bench.py: --chunks and --prefixes take comma-separated integers",
              file=sys.stderr)
        return 2
    if a.runs < 1 or min(chunks) < 1 or min(prefixes) < 0:
        print("sdpa_extend_bench.py: --runs and chunks must be >= 1, prefixes >= 0", file=sys.stderr)
        return 2
    HQ, HK, D = 32, 8, 128
    plan = [(c, p) for c in chunks for p in prefixes]
    if a.dry_run:
        for c, p in plan:
            print(f"chunk {c} prefix {p}: {'is_causal' if p == 0 else 'causal_lower_right'}, "
                  f"{pairs(c, p)} visible pairs")
        return 0
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right
    except Exception as e:  # noqa: BLE001 - any import failure means: no peer here
        print(f"sdpa_extend_bench.py: torch not usable ({e}): skipped")
        return 77
    if not torch.cuda.is_available():
        print("sdpa_extend_bench.py: no CUDA device: skipped")
        return 77
    backends = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    rows = []
    dev = torch.device("cuda")
    print(f"sdpa_extend_bench.py on {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'backend':10} {'chunk':>7} {'prefix':>7} {'us':>10} {'TFLOP/s':>8}  note")
    with torch.inference_mode():
        for c, p in plan:
            g = torch.Generator(device=dev).manual_seed(c * 1000003 + p)
            q = torch.randn(1, HQ, c, D, device=dev, dtype=torch.bfloat16, generator=g)
            k = torch.randn(1, HK, p + c, D, device=dev, dtype=torch.bfloat16, generator=g)
            v = torch.randn(1, HK, p + c, D, device=dev, dtype=torch.bfloat16, generator=g)
            for name, be in backends:
                note = ""

                def call_bias():
                    if p == 0:
                        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(c, p + c),
                                                          enable_gqa=True)

                mask = None

                def call_mask():
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

                fn = call_bias
                try:
                    with sdpa_kernel([be]):
                        fn()
                except Exception:  # noqa: BLE001 - the backend refused; try the explicit mask
                    try:
                        mask = torch.ones(c, p + c, device=dev, dtype=torch.bool).tril(diagonal=p)
                        fn = call_mask
                        with sdpa_kernel([be]):
                            fn()
                        note = "explicit mask"
                    except Exception as e:  # noqa: BLE001
                        msg = str(e).strip().splitlines()[0][:100] if str(e).strip() else type(e).__name__
                        rows.append((name, c, p, HQ, HK, D, "", "", f"unsupported: {msg}"))
                        print(f"{name:10} {c:7} {p:7} {'':>10} {'':>8}  unsupported: {msg}")
                        mask = None
                        torch.cuda.empty_cache()
                        continue
                with sdpa_kernel([be]):
                    for _ in range(a.warmup):
                        fn()
                    torch.cuda.synchronize()
                    ts = []
                    for _ in range(a.runs):
                        e0 = torch.cuda.Event(enable_timing=True)
                        e1 = torch.cuda.Event(enable_timing=True)
                        e0.record()
                        fn()
                        e1.record()
                        e1.synchronize()
                        ts.append(e0.elapsed_time(e1) * 1e3)
                ts.sort()
                us = ts[len(ts) // 2]
                tf = 4.0 * HQ * D * pairs(c, p) / (us * 1e-6) / 1e12
                rows.append((name, c, p, HQ, HK, D, f"{us:.2f}", f"{tf:.2f}", note))
                print(f"{name:10} {c:7} {p:7} {us:10.1f} {tf:8.1f}  {note}")
                mask = None
            del q, k, v
            torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        f.write("backend,chunk,prefix,q_heads,kv_heads,head_dim,median_us,tflops,note\n")
        for r in rows:
            f.write(",".join(str(x) for x in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
