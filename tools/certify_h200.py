#!/usr/bin/env python3
"""tools/certify_h200.py: certificates of third-party paged-decode kernels (issue #20 item 5).

On the H200 (tools/gpu_run.sh step `certify`), for each kernel: build decode inputs, run the
kernel, and certify its output through `import lowp` (lowp/certify.h) against the arithmetic
the kernel is declared to compute. Writes OUT/certify-h200.md (one section per kernel: cases,
worst |got - exact| / bound, verdict counts, the outside-bound cases with their reproducer) and
OUT/certify-h200.json (--report NAME: OUT/NAME.md and .json). Fails soft per kernel: an import
or run failure is reported in its section and the other kernels still run.

    python3 tools/certify_h200.py --out OUT [--lowp build/tools/lowp] [--quick]
                                  [--kernels k1,k2,...] [--budget-s S] [--device cuda|cpu]
                                  [--report NAME]

Kernels (names for --kernels; default: all but the emulator ones):
  sdpa-{flash,efficient,cudnn,math}-bf16   torch SDPA (one backend each) on a BF16 cache
                                           (FlashInfer NHD layout, bf16);
  sdpa-{flash,efficient,cudnn,math}-fp8dq  torch SDPA on an FP8 E4M3 cache dequantized to BF16
                                           (vLLM layout; power-of-two scales, so the dequantized
                                           values are exact in BF16 and the cache's values are
                                           what the kernel reads);
  flashinfer-fp8, flashinfer-bf16          flashinfer.BatchDecodeWithPagedKVCacheWrapper
                                           (use_tensor_cores, NHD), FP8 E4M3 KV (k_scale !=
                                           v_scale) or BF16, head dim 128 (the modules of the
                                           bundle in .whl/flashinfer, tools/flashinfer_bundle.py);
  torch-vllm-fp8                           the README's Python example as a PyTorch user runs it:
                                           torch tensors (on --device) for the vLLM FP8 cache, the
                                           page table, Q and the output of a float32 torch decode,
                                           handed to lowp.certify as they are;
  lowp-gpu-fp8, lowp-gpu-bf16              lowp's own kernel, `lowp gpu attn` (one sequence a
                                           call: the command is a batch-1 decode);
  emulator, emulator-bf16                  `lowp gpu attn --emulate` (CPU; the fake kernels the
                                           local test runs, no torch needed);
  emulator-v-scale-ignored                 the same with v_scale taken back out of the output
                                           (exact: a power of two): a broken fake kernel that must
                                           fail its certificate;
  sglang-triton-bf16, sglang-triton-fp8    SGLang's Triton decode_attention_fwd (page size 1:
                                           kv_indices are token slots), BF16 cache, or FP8 E4M3
                                           with k_scale != v_scale, imported from the sglang
                                           0.5.23 wheel or its reduced copy (tools/
                                           reduce_wheel.py; never copied here; sglang_setup
                                           says how, and refuses another version);
                                           GQA 32/8 and MHA 8/8, 12/12 (SG_SHAPES); the kernel's
                                           own declaration is sg_declared (source lines cited),
                                           certified one sequence at a time with its split;
  sglang-triton-fp8-no-k-scale,            negative controls: the kernel called with k_scale 1,
  sglang-triton-fp8-p-bf16-declared        and P declared BF16 while the kernel rounds it to
                                           E4M3 (both must fail; not run by default).
  --device cpu runs the sglang kernels in Triton's interpreter on CPU tensors (a local proof
  without a GPU, with --quick: BF16 values travel as f32 there, see sglang_run).
Shapes: batch 1..64, contexts 512..32K, 32 query / 8 KV heads, head dim 128 (64 and 256 in the
last cases); --quick: two small shapes. Every input is drawn from one seed per case (--seed),
so `--kernels K --case N` regenerates case N of kernel K (the reproducer).

Declared arithmetic (what each kernel is held to; lowp certify's flags): Q as given (BF16), P
rounded to BF16 before P.V, fp32 accumulation in MMA steps of 16 positions, split-K in 128-
position splits with fp32 partials (a flash-decoding split, an envelope for kernels that do
not split), BF16 output; FlashInfer's FP8 path also `out *= v_scale` after the output rounding
(kernels.md 3.2); lowp's kernel its own chunk (--chunk 128). Exit 0 when every certified
kernel is within bound everywhere, 1 when any is outside or a NaN mismatch, 2 on bad usage.
"""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import lowp  # noqa: E402

P = 16  # page size
SPLIT = 128
SHAPES = [  # batch, context, q heads, kv heads, head dim
    (1, 512, 32, 8, 128), (64, 512, 32, 8, 128), (8, 4096, 32, 8, 128), (1, 32768, 32, 8, 128),
    (8, 32768, 32, 8, 128), (16, 2048, 32, 8, 64), (4, 8192, 32, 8, 256),
]
QUICK = [(2, 512, 32, 8, 128), (3, 700, 8, 8, 64)]
KS, VS = 2.0 ** -4, 2.0 ** -3  # FP8 scales: non-unit, k != v, powers of two


def bf16(x):
    """x rounded to BF16 (nearest even), as float32 (NaN-free inputs)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


class Case:
    """Decode inputs: q [B, Hq, D], per-sequence K/V [n, Hkv, D] (BF16 values), lengths
    between n/2 and n (the first is n), pages shuffled."""

    def __init__(self, seed, B, n, Hq, Hkv, D):
        rng = np.random.default_rng(seed)
        self.B, self.n, self.Hq, self.Hkv, self.D = B, n, Hq, Hkv, D
        self.lens = np.array([n] + list(rng.integers(n // 2, n + 1, B - 1)), np.int32)
        self.q = bf16(rng.standard_normal((B, Hq, D)))
        self.k = [bf16(rng.standard_normal((int(L), Hkv, D)) * 1.5) for L in self.lens]
        self.v = [bf16(rng.standard_normal((int(L), Hkv, D))) for L in self.lens]
        for k in self.k:
            k[:, :, 3] *= 8.0  # an outlier channel, as real keys have
        self.npages = [(int(L) + P - 1) // P for L in self.lens]
        total = sum(self.npages)
        perm = rng.permutation(total).astype(np.int32)
        self.indptr = np.concatenate([[0], np.cumsum(self.npages)]).astype(np.int32)
        self.indices = perm
        self.last = (self.lens - (np.array(self.npages) - 1) * P).astype(np.int32)
        self.bt = np.zeros((B, max(self.npages)), np.int32)
        for b in range(B):
            self.bt[b, : self.npages[b]] = perm[self.indptr[b]: self.indptr[b + 1]]
        self.total = total

    def pool(self, rows, dtype):
        """rows[b] [n_b, Hkv, D] -> a paged NHD pool [pages, P, Hkv, D] in this case's pages."""
        pool = np.zeros((self.total, P, self.Hkv, self.D), dtype)
        for b in range(self.B):
            x = rows[b]
            pad = np.zeros((self.npages[b] * P,) + x.shape[1:], dtype)
            pad[: x.shape[0]] = x
            pool[self.indices[self.indptr[b]: self.indptr[b + 1]]] = pad.reshape(-1, P, self.Hkv, self.D)
        return pool

    def bf16_pool(self):
        k = self.pool([x.view(np.uint32) >> 16 for x in self.k], np.uint32).astype(np.uint16)
        v = self.pool([x.view(np.uint32) >> 16 for x in self.v], np.uint32).astype(np.uint16)
        return k, v

    def fp8_codes(self):
        """FP8 codes per sequence (lowp's quantize-on-write: sat RNE of x / scale)."""
        return ([lowp.quantize(x, "fp8_e4m3", KS)[0] for x in self.k],
                [lowp.quantize(x, "fp8_e4m3", VS)[0] for x in self.v])

    def fp8_pool(self):
        kc, vc = self.fp8_codes()
        return self.pool(kc, np.uint8), self.pool(vc, np.uint8)


DECLARED = dict(q_dtype="bf16", p_dtype="bf16", out_dtype="bf16", mma_k=16, split_tokens=SPLIT, partial_dtype="f32")


def certify_bf16(c, out):
    k, v = c.bf16_pool()
    return lowp.certify("flashinfer", k, v, k_scale=1.0, v_scale=1.0, query=c.q, output=out, kv_indptr=c.indptr,
                        kv_indices=c.indices, kv_last_page_len=c.last, kv_layout="NHD", **DECLARED)


def certify_fp8(c, out, layout="vllm-fp8", **extra):
    kc, vc = c.fp8_pool()
    decl = dict(DECLARED, **extra)
    if layout == "vllm-fp8":
        return lowp.certify("vllm-fp8", kc, vc, k_scale=KS, v_scale=VS, query=c.q, output=out, block_table=c.bt,
                            seq_lens=c.lens, **decl)
    return lowp.certify("flashinfer", kc, vc, k_scale=KS, v_scale=VS, query=c.q, output=out, kv_indptr=c.indptr,
                        kv_indices=c.indices, kv_last_page_len=c.last, kv_layout="NHD", **decl)


# ---- kernels: setup() -> state (raises when unavailable), run(state, case) -> certificate ----
def torch_setup():
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("torch %s sees no CUDA device" % torch.__version__)
    return torch


def sdpa_run(backend, fp8):
    def run(torch, c):
        from torch.nn.attention import SDPBackend, sdpa_kernel
        be = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
              "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[backend]
        if fp8:  # torch's E4M3 decode times the power-of-two scale: exact in f32 and BF16
            kc, vc = c.fp8_codes()
            deq = lambda x, s: (torch.from_numpy(x).view(torch.float8_e4m3fn).float() * s).numpy()  # noqa: E731
            ks, vs = [deq(x, KS) for x in kc], [deq(x, VS) for x in vc]
        else:
            ks, vs = c.k, c.v
        G = c.Hq // c.Hkv
        out = np.empty((c.B, c.Hq, c.D), np.float32)
        with sdpa_kernel([be]):
            for b in range(c.B):  # ragged lengths: one call per sequence (no padding mask)
                q = torch.from_numpy(c.q[b][None, :, None, :]).cuda().bfloat16()
                k = torch.from_numpy(ks[b]).cuda().bfloat16().permute(1, 0, 2)[None].repeat_interleave(G, 1)
                v = torch.from_numpy(vs[b]).cuda().bfloat16().permute(1, 0, 2)[None].repeat_interleave(G, 1)
                o = torch.nn.functional.scaled_dot_product_attention(q, k.contiguous(), v.contiguous())
                out[b] = o[0, :, 0, :].float().cpu().numpy()
        return certify_fp8(c, out) if fp8 else certify_bf16(c, out)
    return run


def flashinfer_setup():
    torch = torch_setup()
    import flashinfer
    return torch, flashinfer


def flashinfer_run(fp8):
    """FlashInfer's paged decode as vLLM builds it for GQA models and as tools/flashinfer_bench.py
    times it (use_tensor_cores=True: the FA2 prefill kernel with one query row per head, the
    modules tools/flashinfer_bundle.py prebuilds), BF16 Q, a BF16 or FP8 E4M3 cache; the FP8
    path's v_scale is `out *= v_scale` after the BF16 output (v_scale_after_output)."""
    def run(state, c):
        torch, flashinfer = state
        kc, vc = c.fp8_pool() if fp8 else c.bf16_pool()
        ws = torch.empty(128 * 1024 * 1024, dtype=torch.uint8, device="cuda")
        w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, "NHD", use_tensor_cores=True)
        dev = lambda a: torch.from_numpy(a).cuda()  # noqa: E731
        kvdt = torch.float8_e4m3fn if fp8 else torch.bfloat16
        w.plan(dev(c.indptr), dev(c.indices), dev(c.last), c.Hq, c.Hkv, c.D, P, pos_encoding_mode="NONE",
               q_data_type=torch.bfloat16, kv_data_type=kvdt)
        if fp8:
            o = w.run(dev(c.q).bfloat16(), (dev(kc).view(kvdt), dev(vc).view(kvdt)), k_scale=KS, v_scale=VS)
            return certify_fp8(c, o.float().cpu().numpy(), layout="flashinfer", v_scale_after_output=True)
        k = dev(kc.view(np.int16)).view(kvdt)
        v = dev(vc.view(np.int16)).view(kvdt)
        o = w.run(dev(c.q).bfloat16(), (k, v))
        return certify_bf16(c, o.float().cpu().numpy())
    return run


def torch_vllm_setup(device):
    def setup():
        import torch
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch %s sees no CUDA device" % torch.__version__)
        return torch, device
    return setup


def torch_vllm_run(state, c):
    """The README's Python example as a PyTorch user runs it: a vLLM FP8 cache held in torch
    tensors on the device (uint8 [num_blocks, block_size, H, D], int32 block table and
    sequence lengths), a binary32 decode written in torch (the kernel under test: E4M3 codes
    viewed as float8_e4m3fn, times k_scale / v_scale, softmax and P.V in float32, TF32 off),
    and lowp.certify handed those torch tensors (read through .cpu(), no conversion by the
    caller). Declared: Q as given, P f32, f32 out, sums in any order (mma_k 1), no split."""
    torch, dev = state
    torch.backends.cuda.matmul.allow_tf32 = False
    kc, vc = c.fp8_pool()
    kt = torch.from_numpy(kc).to(dev)                     # the framework's cache tensors
    vt = torch.from_numpy(vc).to(dev)
    bt = torch.from_numpy(c.bt).to(dev)
    sl = torch.from_numpy(c.lens).to(dev)
    q = torch.from_numpy(c.q).to(dev)
    G = c.Hq // c.Hkv
    out = torch.empty((c.B, c.Hq, c.D), dtype=torch.float32, device=dev)
    for b in range(c.B):
        n = int(sl[b])
        pages = bt[b, : (n + P - 1) // P].long()
        K = kt[pages].view(torch.float8_e4m3fn).float().reshape(-1, c.Hkv, c.D)[:n] * KS
        V = vt[pages].view(torch.float8_e4m3fn).float().reshape(-1, c.Hkv, c.D)[:n] * VS
        K = K.repeat_interleave(G, 1).permute(1, 0, 2)     # [Hq, n, D]
        V = V.repeat_interleave(G, 1).permute(1, 0, 2)
        s = torch.einsum("hnd,hd->hn", K, q[b]) * (1.0 / float(np.sqrt(c.D)))
        p = torch.exp(s - s.max(dim=1, keepdim=True).values)
        out[b] = torch.einsum("hn,hnd->hd", p, V) / p.sum(dim=1, keepdim=True)
    return lowp.certify("vllm-fp8", kt, vt, k_scale=KS, v_scale=VS, block_table=bt, seq_lens=sl, query=q,
                        output=out, p_dtype="f32", out_dtype="f32")


# ---- SGLang's Triton decode attention, imported from the sglang wheel (never copied here) ----
# The one sglang version the declarations (sg_declared) are derived for, and its files: the
# kernel and score_mod.py, the one sglang module it imports that we carry rather than stand
# in for (56 lines of plain Python and Triton; tools/reduce_wheel.py keeps both).
SG_VERSION = "0.5.23"
SG_FILE = "sglang/kernels/ops/attention/decode_attention.py"
SG_SCORE_MOD = "sglang/kernels/ops/attention/score_mod.py"
SG_MAX_SPLITS = 8  # SGLang's default --triton-attention-num-kv-splits (server_args.py)
SG_MIN_BLOCK_KV = 32  # decode_attention.py:46 _MIN_BLOCK_KV: split lengths are multiples of it
# SHAPES (GQA 32/8) and MHA ones (kv_group_num 1 takes _fwd_kernel_stage1, decode_attention.py:1269),
# interleaved and the largest last, so that a time budget that runs out still leaves both paths run
SG_SHAPES = [SHAPES[0], (4, 4096, 8, 8, 128), SHAPES[1], (16, 2048, 8, 8, 64), SHAPES[2], (2, 8192, 8, 8, 256),
             SHAPES[5], SHAPES[6], SHAPES[3], (2, 32768, 12, 12, 128), SHAPES[4]]


# What the CPU run is not: the interpreter holds BF16 as uint16 and does integer arithmetic
# on it (triton/runtime/interpreter.py binary_op), so BF16 values travel as f32; and its
# f32 -> FP8 cast (_convert_float) adds the cut-off bit (round half up, not to even) and ORs
# a mantissa carry into the exponent, so the FP8 path's P = p.to(fp8) is rounded worse than
# the GPU's cvt.rn.satfinite.e4m3x2.f32 (the FP8 GQA path's Q is therefore given already
# E4M3 there, sglang_run).
INTERP_NOTE = " interpreter (CPU: BF16 as f32, f32 -> E4M3 casts not RNE: FP8 GQA given E4M3 Q)"


def sg_stand_ins():
    """Ours, for what decode_attention.py (0.5.23) imports from sglang besides score_mod,
    all of it read only on ROCm or MLA paths this harness does not take:
      31 from sglang.kernels.ops.attention.score_mod import unpack_aux_tensors: the real
         file (carried), loaded by path; with score_mod None it returns (None, 0, 0, 0);
      32 from sglang.srt.environ import envs: read by _keep_scheduler_splits (116),
         _mla_tuning_applies (177) and the Lean grid (1968), each behind `_is_hip and`:
         a stand-in whose every attribute raises, so a path that does read it fails loudly;
      33-38 from sglang.srt.utils import get_device_core_count, is_gfx95_supported,
         is_gfx1250_supported, is_hip: is_hip() False (line 40: _is_hip, the CUDA block
         sizes and paths, which the interpreter must take too); _is_gfx1250 = _is_hip and
         ... (41) never calls is_gfx1250_supported; the other two are read only under
         _is_hip (145, 176): stand-ins that raise.
    The packages above them (sglang, sglang.srt, sglang.kernels, ...) are empty modules:
    sglang/__init__.py and sglang.srt.utils pull in SGLang's dependency tree, which the
    device lacks. Returns {module name: module}."""
    import types

    def refuse(what):
        def f(*a, **k):
            raise RuntimeError("sglang stand-in: %s is read on a path this harness does not declare" % what)
        return f

    class Envs:
        def __getattr__(self, name):
            return refuse("envs." + name)()

    mods = {}
    for n in ("sglang", "sglang.srt", "sglang.kernels", "sglang.kernels.ops", "sglang.kernels.ops.attention"):
        mods[n] = types.ModuleType(n)
        mods[n].__path__ = []  # a package with nothing in it
    mods["sglang.srt.environ"] = types.ModuleType("sglang.srt.environ")
    mods["sglang.srt.environ"].envs = Envs()
    u = mods["sglang.srt.utils"] = types.ModuleType("sglang.srt.utils")
    u.is_hip = lambda: False
    for n in ("get_device_core_count", "is_gfx95_supported", "is_gfx1250_supported"):
        setattr(u, n, refuse(n))
    return mods


def sg_version(site):
    """The sglang dist-info in site whose RECORD lists the kernel file with the sha256 of
    the file there: (version, RECORD path). Raises when none does: a kernel file that is not
    the one its version shipped is not the kernel the declarations are derived for."""
    import csv
    from reduce_wheel import record_hash  # tools/reduce_wheel.py: the one RECORD hash
    with open(os.path.join(site, SG_FILE), "rb") as f:
        h = record_hash(f.read())
    seen = []
    for d in sorted(os.listdir(site)):
        if not (d.startswith("sglang-") and d.endswith(".dist-info")):
            continue
        rec = os.path.join(site, d, "RECORD")
        rows = {r[0]: r[1] for r in csv.reader(open(rec, encoding="utf-8")) if len(r) == 3} \
            if os.path.isfile(rec) else {}
        seen.append(d)
        if rows.get(SG_FILE) == h:
            return d[len("sglang-"):-len(".dist-info")], rec
    raise RuntimeError("%s: no sglang dist-info in %s lists it with its sha256 (%s; found %s)" %
                       (SG_FILE, site, h, ", ".join(seen) or "none"))


def sglang_setup(device):
    """Load decode_attention.py (and score_mod.py) from the installed sglang wheel (on
    sys.path: PYTHONPATH or site-packages; the reduced wheel of tools/reduce_wheel.py will
    do) by file, without importing the sglang package (sg_stand_ins says what stands in
    for the rest, sys.modules entries for the duration of the load). Refuses a version other
    than SG_VERSION: the declarations are that version's."""
    def setup():
        if device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"  # read when triton.jit wraps the kernels
        else:  # a fresh cache: the PTX this run compiles is the evidence for sg_mma (read at compile time)
            os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="lowp-triton-cache-")
        import importlib.util
        import inspect
        import torch
        if device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch %s sees no CUDA device" % torch.__version__)
        found = [d for d in sys.path if os.path.isfile(os.path.join(d or ".", SG_FILE))]
        if not found:
            raise RuntimeError("no %s on sys.path (install the sglang %s wheel, or its reduced copy: pip install "
                               "--no-deps --target DIR, or tools/reduce_wheel.py unpack; then PYTHONPATH=DIR)" %
                               (SG_FILE, SG_VERSION))
        site = found[0] or "."
        ver, rec = sg_version(site)
        if ver != SG_VERSION:
            raise RuntimeError("sglang %s (%s): the declarations here are derived for %s" % (ver, rec, SG_VERSION))

        def load(name, rel):
            spec = importlib.util.spec_from_file_location(name, os.path.join(site, rel))
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
            return mod
        mods = sg_stand_ins()
        names = list(mods) + ["sglang.kernels.ops.attention.score_mod", "lowp_sglang_decode_attention"]
        saved = {n: sys.modules.get(n) for n in names}
        sys.modules.update(mods)
        try:
            load(names[-2], SG_SCORE_MOD)
            mod = load(names[-1], SG_FILE)
        finally:  # the kernels hold their globals; nothing imports sglang after the load
            for n, m in saved.items():
                if m is None:
                    sys.modules.pop(n, None)
                else:
                    sys.modules[n] = m
        fwd = mod.decode_attention_fwd
        # decode_attention.py:1191-1219: the 13 this harness passes, then keywords it leaves
        # at their defaults (logit_cap 0, sinks None, xai_temperature_len -1, has_mla False,
        # use_pdl False, page_size 1, score_mod / aux_tensors None, the Lean ones None: Lean
        # is ROCm only (1236), uneven_batch None: no batch rotation)
        want = ["q", "k_buffer", "v_buffer", "o", "kv_indptr", "kv_indices", "attn_logits", "attn_lse",
                "num_kv_splits", "max_kv_splits", "sm_scale", "k_scale", "v_scale"]
        defaults = dict(logit_cap=0.0, sinks=None, xai_temperature_len=-1, has_mla=False, use_pdl=False,
                        page_size=1, score_mod=None, aux_tensors=None, uneven_batch=None)
        sig = inspect.signature(fwd).parameters
        got = list(sig)
        if got[:len(want)] != want or any(k not in sig or sig[k].default != v for k, v in defaults.items()):
            raise RuntimeError("%s: decode_attention_fwd%s is not the signature this harness declares (%s, "
                               "then %s)" % (SG_FILE, tuple(got), ", ".join(want), defaults))
        import triton
        about = "sglang %s (%s, sha256 as in %s), triton %s%s, torch %s" % (
            ver, SG_FILE, os.path.relpath(rec, site), triton.__version__, INTERP_NOTE if device == "cpu" else "",
            torch.__version__)
        return {"torch": torch, "fwd": fwd, "device": device, "about": about, "version": ver,
                "cache": os.environ.get("TRITON_CACHE_DIR") if device == "cuda" else None}
    return setup


def sg_splits(lens, B):
    """num_kv_splits per sequence: SGLang's static fill (max_kv_splits, triton_backend.py
    get_num_kv_splits) for even b, fewer (1 + b % 8) for odd b, as its dynamic policy gives
    short sequences; and the split length the kernel derives (decode_attention.py:308-310,
    632-634: cdiv(cdiv(len, splits), 32) * 32), the split_tokens each sequence is certified with."""
    s = np.array([SG_MAX_SPLITS if b % 2 == 0 else 1 + b % SG_MAX_SPLITS for b in range(B)], np.int32)
    cdiv = lambda a, b: -(-a // b)  # noqa: E731
    per = np.array([cdiv(cdiv(int(L), int(k)), SG_MIN_BLOCK_KV) * SG_MIN_BLOCK_KV for L, k in zip(lens, s)])
    return s, per


def sglang_run(fp8, k_scale_factor=1.0, p_declared=None):
    """The kernel on this case's cache at page size 1 (kv_indices are token slots: the slots
    of the case's shuffled pages, slot = page * 16 + offset, so the pool is the same bytes as
    [slots, Hkv, D]); certified as a FlashInfer cache of page size 1 over the same bytes, one
    sequence at a time with its own split length. k_scale_factor != 1: the kernel is given a
    wrong k_scale (a broken call, which must fail); p_declared: P declared other than the
    kernel rounds it (a broken declaration, which must fail)."""
    def run(st, c):
        torch, dev = st["torch"], st["device"]
        cpu = dev == "cpu"
        kp, vp = c.fp8_pool() if fp8 else c.bf16_pool()
        H, D = c.Hkv, c.D
        slots = np.concatenate([c.bt[b, np.arange(L) // P] * P + np.arange(L) % P
                                for b, L in enumerate(c.lens)]).astype(np.int32)
        indptr = np.concatenate([[0], np.cumsum(c.lens)]).astype(np.int32)

        def buf(pool):  # the cache as the kernel reads it: [slots, Hkv, D] in the cache dtype
            t = torch.from_numpy(pool.reshape(-1, H, D).view(np.int16 if pool.dtype == np.uint16 else np.uint8))
            t = t.view(torch.float8_e4m3fn if fp8 else torch.bfloat16)
            # The interpreter does integer arithmetic on BF16 storage (interpreter.py binary_op
            # on uint16 data): on the CPU the BF16 values travel as f32, exactly.
            return (t.float() if cpu and not fp8 else t).to(dev)
        qdt = torch.float32 if cpu else torch.bfloat16
        mha = c.Hq == c.Hkv
        qv = c.q
        if fp8 and cpu and not mha:
            # GQA rounds Q to E4M3 (q.to(K_Buffer.dtype.element_ty), decode_attention.py:661),
            # which the interpreter does not do RN (INTERP_NOTE): there Q is given already
            # E4M3 (lowp's RN of the BF16 Q), so that cast is exact and the declared one the
            # identity; on the GPU the kernel casts the BF16 Q itself
            qv = torch.from_numpy(lowp.quantize(c.q, "fp8_e4m3", 1.0)[0]).view(torch.float8_e4m3fn).float().numpy()
        q = torch.from_numpy(qv).to(qdt).to(dev)
        nsplit, per = sg_splits(c.lens, c.B)
        o = torch.empty((c.B, c.Hq, D), dtype=qdt, device=dev)
        logits = torch.empty((c.B, c.Hq, SG_MAX_SPLITS, D), dtype=torch.float32, device=dev)
        lse = torch.empty((c.B, c.Hq, SG_MAX_SPLITS), dtype=torch.float32, device=dev)
        ti = lambda a: torch.from_numpy(a).to(dev)  # noqa: E731
        st["fwd"](q, buf(kp), buf(vp), o, ti(indptr), ti(slots), logits, lse, ti(nsplit), SG_MAX_SPLITS,
                  1.0 / np.sqrt(D), (KS if fp8 else 1.0) * k_scale_factor, VS if fp8 else 1.0)
        out = o.float().cpu().numpy()
        mma = sg_mma(st.get("cache"), "_fwd_kernel_stage1" if mha else "_fwd_grouped_kernel_stage1")
        decl = sg_declared(fp8, mha, cpu, mma)
        if p_declared:
            decl["p_dtype"] = p_declared
        certs, na = [], []
        for b in range(c.B):
            try:
                certs.append(lowp.certify("flashinfer", kp.reshape(-1, 1, H, D), vp.reshape(-1, 1, H, D),
                                          k_scale=KS if fp8 else 1.0, v_scale=VS if fp8 else 1.0, query=qv,
                                          output=out, kv_indptr=indptr, kv_indices=slots,
                                          kv_last_page_len=np.ones(c.B, np.int32), kv_layout="NHD",
                                          split_tokens=int(per[b]), seq=b, **decl))
            except ValueError as e:  # lowp's bound does not apply to this sequence: said, not hidden
                if "too coarse" not in str(e):
                    raise
                na.append((b, str(e)))
        if not certs:
            raise NotCertifiable("no sequence of %d: %s" % (c.B, na[0][1].split(": ", 1)[-1]))
        m = Merged(certs)
        if na:
            m.diagnosis = "; ".join(x for x in (m.diagnosis, "not certified: sequences %s of %d (%s)" % (
                ",".join(str(b) for b, _ in na), c.B, na[0][1].split(": ", 1)[-1])) if x)
        m.declared = "%s; split_tokens per sequence %d..%d (num_kv_splits %s)%s" % (
            ", ".join("%s %s" % kv for kv in decl.items()), per.min(), per.max(),
            ",".join(str(x) for x in nsplit[:8]) + (",..." if c.B > 8 else ""),
            sg_undeclared(fp8, mha, cpu, mma))
        return m
    return run


MMA_RE = re.compile(r"^\s*((?:wgmma\.mma_async|mma\.sync)\.[a-z0-9_.]+)", re.M)


def sg_mma(cache, kernel):
    """The tensor-core instructions in the PTX Triton compiled for `kernel` in this run (its
    cache directory, fresh per setup: sglang_setup), as a sorted list of mnemonics without
    their operands, e.g. ['mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32']; [] when
    there is no cache (the interpreter) or no such file."""
    if not cache:
        return []
    found = set()
    for f in glob.glob(os.path.join(cache, "**", kernel + ".ptx"), recursive=True):
        with open(f) as fh:
            found.update(MMA_RE.findall(fh.read()))
    return sorted(found)


def sg_mma_frac(mma):
    """The declared tensor-core window of the dots in `mma` (sg_mma): the fraction bits a step
    keeps below its largest term, as measured on Hopper (research notes, conformance-and-style
    4.5: mma.sync bf16 25 bits - lowp's own probe, reports/gpu-mma-probe-h200.md, fits
    g16 f25 -, mma.sync e4m3 23, wgmma FP8 13 with an e8m13 result; mma.sync f16, which
    Triton 3.6 emits for an FP8 tl.dot on sm_90 with E4M3 operands widened to f16, 25: the
    probe's f16 section holds E4M3-valued tiles through it to the bf16 model); 0 (binary32 adds) when
    there is no tensor core; the smallest window when the PTX holds several."""
    fr = []
    for m in mma:
        if m.startswith("wgmma") and "e4m3" in m:
            fr.append(13)
        elif m.startswith("mma.sync") and "e4m3" in m:
            fr.append(23)
        elif m.startswith("mma.sync") and ("bf16" in m or ".f16.f16." in m):
            fr.append(25)
        else:
            raise ValueError("no declared window for the tensor-core instruction %s" % m)
    return min(fr) if fr else 0


def sg_declared(fp8, mha, cpu, mma=()):
    """The arithmetic decode_attention.py (sglang 0.5.23) does, in lowp certify terms (lines
    of that file; Triton's promotion rules: language/semantic.py computation_type_impl). The
    entry point (1191) folds k_scale into the score scale, sm_scale * k_scale (1282 MHA, 1305
    GQA), and takes neither the Lean kernel (1236-1237: _is_hip) nor the MLA tuning (_mla_launch_plan
    191, _mla_tuning_applies 173: _is_hip first): num_kv_splits is the caller's, per sequence.
    GQA (32/8), _fwd_grouped_kernel_stage1 (530), BLOCK_N 32 (818), BLOCK_H 16:
      Q: q_k = q.to(K_Buffer.dtype.element_ty) (661; IS_GFX1250 is _is_hip and ..., 41):
        for a BF16 cache the identity, q_dtype bf16; for an FP8 cache Q is rounded to E4M3
        (new since 0.5.10, which cast K to BF16 instead): q_dtype e4m3, no q_scale;
      qk = tl.dot(q_k, k) (692): a BF16 MMA of k width 16, or an FP8 (E4M3 x E4M3) one of
        k width 32, fp32 accumulator; qk *= sm_scale_withk (708) f32; no logit_cap (0),
        xai temperature (-1) or score_mod (None): 710-726 not taken;
      p = tl.exp(qk - max) f32 (752), e_sum sums the unrounded p (764): l_unrounded; P.V is
        tl.dot(p.to(v.dtype), v) (762): P rounded to the cache dtype (BF16, or E4M3: p_dtype
        e4m3), the MMA k width 16 (BF16) / 32 (FP8), Triton folding `acc +=` into the MMA
        accumulator (unfolded, each 32-position tile adds one step: the same bound);
      the tensor cores' window (mma_frac) from the instructions found in the PTX this run
        compiled (sg_mma, sg_mma_frac): on sm_90 Triton gives FP8 dots no promotion
        (nvidia/compiler.py max_num_imprecise_acc_default 2**30, and the kernel passes no
        max_num_imprecise_acc), so the instruction's own accumulation is the declaration;
      on the CPU the interpreter's dot is one f32 matmul per 32-position tile: mma_k 32,
        and a f32 V (BF16 values) gives p.to(f32), P unrounded: p_dtype f32.
    MHA (kv_group_num 1, 1269), _fwd_kernel_stage1 (235), BLOCK_N 64 (448):
      qk = tl.sum((q[None, :] * k).to(tl.float32), 1) (352): for a BF16 cache bf16 * bf16
        is BF16 (rule 5), so each product is rounded to BF16 before the f32 sum (new since
        0.5.10, whose sum was BF16 too): prod_dtype bf16; on the CPU the operands are f32
        and the products exact. For FP8, bf16 * fp8 is f32 (rule 5's second line):
        exact products, Q as given (q_dtype bf16). qk *= sm_scale_withk (353) f32;
      p = tl.exp (398) f32, never rounded: p_dtype f32; acc += tl.sum(p[:, None] * v, 0)
        (400): f32 products, a tree over BLOCK_N 64: mma_k 64.
    Split-K: splits of cdiv(cdiv(len, num_kv_splits), 32) * 32 positions (308-310 /
      632-634); partials acc / e_sum (414 / 776) and lse = e_max + log(e_sum) (426 / 788)
      stored f32; stage 2 (_fwd_kernel_stage2, 935) merges them with exp(lse - max)
      (1004-1007): partial_dtype f32 (tl.log's error is inside the merge-weight term of the
      bound's factor 2, not a term of its own).
    Output: acc / e_sum * v_scale in f32 (1016; no sinks: HAS_SINK False), stored to o's
      dtype (BF16; f32 on the CPU): out bf16, v_scale before the output rounding."""
    if mha:
        p, k = "f32", 64
    elif fp8:
        p, k = "e4m3", 32
    else:
        p, k = ("f32", 32) if cpu else ("bf16", 16)
    d = dict(q_dtype="e4m3" if fp8 and not mha else "bf16", p_dtype=p, out_dtype="f32" if cpu else "bf16",
             mma_k=k, partial_dtype="f32", l_unrounded=True)
    if mha and not fp8 and not cpu:
        d["prod_dtype"] = "bf16"
    if not mha and not cpu:
        d["mma_frac"] = sg_mma_frac(mma)
        ks = [int(x) for m in mma for x in re.findall(r"\.m\d+n\d+k(\d+)\.", m)]
        if ks:  # positions a tensor-core step fuses: the instruction's k (m16n8k16 f16: 16, not the tile's 32)
            d["mma_k"] = min(ks)
    return d


def sg_undeclared(fp8, mha, cpu, mma=()):
    """What the case's declaration rests on besides the source lines (appended to it): the
    tensor-core instructions found in the compiled PTX (sg_mma), which set mma_frac."""
    if cpu or mha:
        return ""
    return "; PTX of _fwd_grouped_kernel_stage1: %s" % (", ".join(mma) or "no tensor-core instruction found")


class NotCertifiable(ValueError):
    """lowp's bound does not apply to the declared arithmetic on this case (lowp_certify_run's
    'too coarse'): a limit of the certificate, reported as such, not a kernel error."""


class Merged:
    """The certificates of a case's sequences as one (the fields main() reads)."""

    def __init__(self, certs):
        self.outputs = sum(x.outputs for x in certs)
        self.counts = {k: sum(x.counts[k] for x in certs) for k in certs[0].counts}
        self.oracle_rows = sum(x.oracle_rows for x in certs)
        self.worst_ratio = max(x.worst_ratio for x in certs)
        w = [e for x in certs for e in x.worst]
        self.worst = sorted(w, key=lambda e: (e["verdict"] != "nan-mismatch", -e["ratio"]))
        d = {}  # one diagnosis per finding (the counts after " (under" differ per sequence)
        for x in certs:
            if x.diagnosis:
                d.setdefault(x.diagnosis.split(" (under")[0], []).append(x.diagnosis)
        self.diagnosis = "; ".join("%s (%d sequences; the first: %s)" % (k, len(v), v[0][len(k) + 2:-1])
                                   if len(v) > 1 else v[0] for k, v in d.items())
        self.ok = all(x.ok for x in certs)


def lowp_setup(lowp_bin):
    def setup():
        if not os.access(lowp_bin, os.X_OK):
            raise RuntimeError("%s is not an executable (build lowp_cli, or pass --lowp)" % lowp_bin)
        return lowp_bin
    return setup


def lowp_run(fmt, emulate, out_factor=1.0):
    def run(lowp_bin, c):
        out = np.empty((c.B, c.Hq, c.D), np.float32)
        with tempfile.TemporaryDirectory() as d:
            for b in range(c.B):
                np.save(d + "/q.npy", c.q[b][None])
                np.save(d + "/k.npy", c.k[b])
                np.save(d + "/v.npy", c.v[b])
                cmd = [lowp_bin, "gpu", "attn", "--q", d + "/q.npy", "--k", d + "/k.npy", "--v", d + "/v.npy",
                       "--kv-format", fmt, "--out", d + "/o.npy", "--chunk", str(SPLIT)]
                if fmt == "fp8_e4m3":
                    cmd += ["--k-scale", repr(KS), "--v-scale", repr(VS)]
                if emulate:
                    cmd.append("--emulate")
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[:3]), r.returncode, r.stderr.strip()[-300:]))
                out[b] = np.load(d + "/o.npy").reshape(c.Hq, c.D) * np.float32(out_factor)
        return certify_fp8(c, out) if fmt == "fp8_e4m3" else certify_bf16(c, out)
    return run


def kernels(lowp_bin, device="cuda"):
    ks = {}
    for be in ("flash", "efficient", "cudnn", "math"):
        ks["sdpa-%s-bf16" % be] = (torch_setup, sdpa_run(be, False), "torch SDPA (%s backend), BF16 cache" % be)
        ks["sdpa-%s-fp8dq" % be] = (torch_setup, sdpa_run(be, True),
                                    "torch SDPA (%s backend), FP8 E4M3 cache dequantized to BF16" % be)
    fi_shapes = [x for x in SHAPES if x[4] == 128]  # the head dim of the bundle's prebuilt modules
    for fp8 in (True, False):
        ks["flashinfer-%s" % ("fp8" if fp8 else "bf16")] = (
            flashinfer_setup, flashinfer_run(fp8), "flashinfer BatchDecodeWithPagedKVCacheWrapper (use_tensor_cores, "
            "NHD, page 16), %s KV" % ("FP8 E4M3" if fp8 else "BF16"), fi_shapes)
    ks["torch-vllm-fp8"] = (torch_vllm_setup(device), torch_vllm_run,
                            "the README's Python example with torch tensors: a float32 torch decode over a "
                            "vLLM FP8 cache held in torch tensors, certified from those tensors")
    ks["lowp-gpu-fp8"] = (lowp_setup(lowp_bin), lowp_run("fp8_e4m3", False), "lowp gpu attn, FP8 E4M3 cache")
    ks["lowp-gpu-bf16"] = (lowp_setup(lowp_bin), lowp_run("bf16", False), "lowp gpu attn, BF16 cache")
    ks["emulator"] = (lowp_setup(lowp_bin), lowp_run("fp8_e4m3", True), "lowp gpu attn --emulate (CPU), FP8")
    ks["emulator-bf16"] = (lowp_setup(lowp_bin), lowp_run("bf16", True), "lowp gpu attn --emulate (CPU), BF16")
    ks["emulator-v-scale-ignored"] = (lowp_setup(lowp_bin), lowp_run("fp8_e4m3", True, 1 / VS),
                                      "lowp gpu attn --emulate, output not multiplied by v_scale (a broken fake)")
    for fp8 in (False, True):
        ks["sglang-triton-%s" % ("fp8" if fp8 else "bf16")] = (
            sglang_setup(device), sglang_run(fp8), "SGLang Triton decode_attention_fwd, page size 1, %s cache" %
            ("FP8 E4M3 (k_scale %g, v_scale %g)" % (KS, VS) if fp8 else "BF16"), SG_SHAPES)
    ks["sglang-triton-fp8-no-k-scale"] = (sglang_setup(device), sglang_run(True, k_scale_factor=1 / KS),
                                          "the same, called with k_scale 1 (a broken call)", SG_SHAPES)
    ks["sglang-triton-fp8-p-bf16-declared"] = (sglang_setup(device), sglang_run(True, p_declared="bf16"),
                                               "the same, P declared BF16 while it rounds P to E4M3 (a broken "
                                               "declaration)", SG_SHAPES)
    return ks


# negative controls (and the CPU fakes): run when named, never by default
NOT_DEFAULT = ("emulator", "emulator-bf16", "emulator-v-scale-ignored", "sglang-triton-fp8-no-k-scale",
               "sglang-triton-fp8-p-bf16-declared")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--lowp", default=os.path.join(ROOT, "build", "tools", "lowp"))
    ap.add_argument("--kernels", default="")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--case", type=int, default=-1, help="run case N only (a reproducer)")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--budget-s", type=float, default=400.0, help="seconds for all kernels together")
    ap.add_argument("--report", default="certify-h200", help="OUT/REPORT.md and .json (e.g. certify-h200-sglang)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="sglang kernels: cpu runs them in Triton's interpreter (use --quick)")
    a = ap.parse_args()
    table = kernels(a.lowp, a.device)
    names = [n for n in a.kernels.split(",") if n] or [n for n in table if n not in NOT_DEFAULT]
    for n in names:
        if n not in table:
            print("certify_h200: unknown kernel %r (known: %s)" % (n, ", ".join(table)), file=sys.stderr)
            return 2
    os.makedirs(a.out, exist_ok=True)
    shapes = QUICK if a.quick else SHAPES
    t0 = time.time()
    per_kernel = a.budget_s / len(names)
    results = []
    for name in names:
        setup, run, what = table[name][:3]
        rec = {"kernel": name, "what": what, "cases": [], "status": "ok"}
        results.append(rec)
        try:
            state = setup()
        except Exception as e:  # fail soft: this kernel is reported, the others run
            rec["status"] = "unavailable: %s: %s" % (type(e).__name__, e)
            print("certify_h200: %s %s" % (name, rec["status"]), flush=True)
            continue
        if isinstance(state, dict) and "about" in state:
            rec["what"] += " [%s]" % state["about"]
        tk = time.time()
        for i, shp in enumerate(shapes if a.quick or len(table[name]) < 4 else table[name][3]):
            if a.case >= 0 and i != a.case:
                continue
            if time.time() - tk > per_kernel or time.time() - t0 > a.budget_s:
                rec["cases"].append({"case": i, "shape": shp, "status": "not run (time budget)"})
                continue
            ts = time.time()
            try:
                c = Case(a.seed * 1000 + i, *shp)
                cert = run(state, c)
            except NotCertifiable as e:
                rec["cases"].append({"case": i, "shape": shp, "status": "not certifiable: %s" % e})
                print("certify_h200: %s case %d: %s" % (name, i, rec["cases"][-1]["status"]), flush=True)
                continue
            except Exception as e:
                rec["cases"].append({"case": i, "shape": shp, "status": "error: %s: %s" % (type(e).__name__, e),
                                     "trace": traceback.format_exc()[-800:]})
                print("certify_h200: %s case %d: %s" % (name, i, rec["cases"][-1]["status"]), flush=True)
                continue
            cr = {"case": i, "shape": shp, "status": "ok" if cert.ok else "FAIL", "outputs": cert.outputs,
                  "counts": cert.counts, "worst_ratio": cert.worst_ratio, "oracle_rows": cert.oracle_rows,
                  "diagnosis": cert.diagnosis, "worst": cert.worst[:4], "seconds": round(time.time() - ts, 1)}
            if hasattr(cert, "declared"):
                cr["declared"] = cert.declared
            rec["cases"].append(cr)
            print("certify_h200: %s case %d %s: %s, worst ratio %.4g (%.1f s)%s" %
                  (name, i, shp, cert.counts, cert.worst_ratio, cr["seconds"],
                   ": " + cert.diagnosis if cert.diagnosis else ""), flush=True)
    with open(os.path.join(a.out, a.report + ".json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(a.out, a.report + ".md"), "w") as f:
        write_md(f, results, a)
    bad = any(c.get("status") == "FAIL" for r in results for c in r["cases"])
    return 1 if bad else 0


def write_md(f, results, a):
    f.write("# Certificates of third-party decode kernels (H200)\n\n")
    f.write("Made by `python3 tools/certify_h200.py --out OUT%s` (tools/gpu_run.sh step `certify`), seed %d. "
            "Declared arithmetic: Q BF16 as given, P BF16, fp32 accumulation in MMA steps of 16, split-K %d "
            "with fp32 partials, BF16 out (FlashInfer FP8: `out *= v_scale` after it; lowp: its own chunk %d). "
            "FP8 caches: k_scale %g, v_scale %g. Cases: batch x context (lengths n/2..n, the first n), "
            "q heads / kv heads, head dim.\n\n" % ((" --quick" if a.quick else "") +
                                                     (" --device cpu" if a.device == "cpu" else ""),
                                                     a.seed, SPLIT, SPLIT, KS, VS))
    for r in results:
        f.write("## %s: %s\n\n" % (r["kernel"], r["what"]))
        if r["status"] != "ok":
            f.write("Not certified: %s\n\n" % r["status"])
            continue
        f.write("| case | batch x ctx | heads | d | outputs | exact | within | outside | nan mismatch | "
                "worst err/bound | oracle rows | s | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        tot = {"exact": 0, "within": 0, "outside": 0, "nan-mismatch": 0}
        worst = 0.0
        for c in r["cases"]:
            B, n, hq, hk, d = c["shape"]
            if "counts" not in c:
                f.write("| %d | %d x %d | %d/%d | %d | | | | | | | | | %s |\n" % (c["case"], B, n, hq, hk, d,
                                                                               c["status"]))
                continue
            k = c["counts"]
            for key in tot:
                tot[key] += k[key]
            worst = max(worst, c["worst_ratio"])
            f.write("| %d | %d x %d | %d/%d | %d | %d | %d | %d | %d | %d | %.4g | %d | %.1f | %s |\n" %
                    (c["case"], B, n, hq, hk, d, c["outputs"], k["exact"], k["within"], k["outside"],
                     k["nan-mismatch"], c["worst_ratio"], c["oracle_rows"], c["seconds"], c["status"]))
        f.write("\nTotals: exact %d, within %d, outside %d, nan mismatch %d; worst err/bound %.4g.\n\n" %
                (tot["exact"], tot["within"], tot["outside"], tot["nan-mismatch"], worst))
        decl = [c for c in r["cases"] if "declared" in c]
        if decl:  # a kernel with its own declaration (sg_declared): stated per case
            f.write("Declared instead of the header's (sg_declared in tools/certify_h200.py gives the kernel "
                    "source line of each):\n\n" + "".join(
                "- case %d: %s\n" % (c["case"], c["declared"]) for c in decl) + "\n")
        for c in r["cases"]:
            if c.get("status") == "FAIL":
                f.write("Outside bound, case %d%s. Reproduce: `python3 tools/certify_h200.py --out OUT --kernels %s "
                        "--case %d --seed %d%s%s`. Worst elements:\n\n" %
                        (c["case"], " (" + c["diagnosis"] + ")" if c["diagnosis"] else "", r["kernel"], c["case"],
                         a.seed, " --quick" if a.quick else "", " --device cpu" if a.device == "cpu" else ""))
                for w in c["worst"]:
                    f.write("- seq %d head %d dim %d (len %d): got %.9g, exact %.17g, bound %.4g, ratio %.4g, %s\n" %
                            (w["batch"], w["head"], w["dim"], w["seq_len"], w["got"], w["exact"], w["bound"],
                             w["ratio"], w["verdict"]))
                f.write("\n")
            elif c.get("status", "").startswith("error"):
                f.write("Case %d error:\n\n```\n%s\n```\n\n" % (c["case"], c.get("trace", c["status"])))


if __name__ == "__main__":
    sys.exit(main())
