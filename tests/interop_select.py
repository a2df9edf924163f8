#!/usr/bin/env python3
"""interop_select: lowp's QSA selector model (lowp/select.h) against an independent numpy
implementation of the same reference, written here from the cited sources
(Hugging Face qwen4_exp Qwen4ExpTextQSAIndexer.forward; vLLM qwen4_exp compression kernel;
ref/notes/selection.md), not from lowp's C.

Per case, bit for bit: the compressed index keys (mean over `ratio` tokens, BF16, Gemma
RMSNorm with (1 + w), partial NeoX RoPE with per-op BF16 rounding, the key format), the
prepared queries, every block score, the selected blocks (top-k, ties to the smaller
index) and the production index list (selected blocks ascending, the open tail, -1
padding, the count column).

Where the reference leaves an order open (torch's fp32 reductions) both sides use the rule
lowp/select.h states: binary64 in index order, rounded once to binary32. numpy gives the
binary32 and BF16/E4M3 roundings (ml_dtypes for the casts, which lowp's torch profile
equals on every input: reports/torch-check-h200.md); cos, sin and pow come from Python's
math module, the C library's functions, as lowp calls them. NVFP4 / MXFP4 / MXFP8 index
keys are lowp's own options with no outside reference: their block quantization is
lowp_block_quantize (proven against MPFR elsewhere), called through ctypes.

Cases: random geometries (index heads 1-5, head dims 32-256, rotary dims 0..head dim,
ratios 1-8, top-k 1-600, with and without the divisor, every key format), sequences of
1-700 tokens, and adversarial inputs: exact ties (repeated key groups), all-negative
scores (every score 0: the tie rule alone decides), huge keys (E4M3 beyond 464 is NaN:
refused), zero keys, tiny keys. --cases N (default 2000; the full tier runs 100000).
Exit 0 all equal, 1 on a difference, 77 when numpy or ml_dtypes is missing.
Seed: --seed, else LOWP_SEED (decimal or 0x hex), else 0x6c6f7770.
"""
import argparse
import ctypes
import math
import os
import sys

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:  # the interop tier skips without them
    print(f"interop_select: skipped: {e}")
    sys.exit(77)

F32 = np.float32
KEYS = {"bf16": 0, "e4m3": 1, "nvfp4": 2, "mxfp4": 3, "mxfp8": 4}
BLOCK_FORMAT = {"nvfp4": 0, "mxfp4": 1, "mxfp8": 2}
BLOCK_SIZE = {"nvfp4": 16, "mxfp4": 32, "mxfp8": 32}
RECIPES = {"nvfp4": [0, 1, 5], "mxfp4": [3, 4, 0], "mxfp8": [3, 4]}


class GlobalScale(ctypes.Structure):
    _fields_ = [("dec", ctypes.c_float), ("enc", ctypes.c_float)]


class QsaConfig(ctypes.Structure):
    _fields_ = [("index_heads", ctypes.c_size_t), ("head_dim", ctypes.c_size_t),
                ("rotary_dim", ctypes.c_size_t), ("ratio", ctypes.c_size_t),
                ("topk", ctypes.c_size_t), ("divide", ctypes.c_int),
                ("rope_theta", ctypes.c_double), ("eps", ctypes.c_float),
                ("keys", ctypes.c_int), ("recipe", ctypes.c_int), ("gs", GlobalScale)]


np.seterr(all="ignore")  # NaN and overflow are cases here, not accidents


def same(a, b, bits):
    """bit-equal, except that any two NaNs are equal: NaN signs and payloads differ between
    torch (lowp's profile) and ml_dtypes, and a NaN score is refused whatever its bits"""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return np.zeros(a.shape, dtype=bool)
    return (a.view(bits) == b.view(bits)) | (np.isnan(a) & np.isnan(b))


def bf16(x):
    return np.asarray(x, dtype=F32).astype(ml_dtypes.bfloat16).astype(F32)


def e4m3(x):
    return np.asarray(x, dtype=F32).astype(ml_dtypes.float8_e4m3fn).astype(F32)


def seq_sum_f64(a, axis=-1):
    """binary64 sum in index order (cumsum is sequential), as float64"""
    a = np.asarray(a, dtype=np.float64)
    if a.shape[axis] == 0:
        return np.zeros(np.delete(a.shape, axis % a.ndim), dtype=np.float64)
    return np.take(np.cumsum(a, axis=axis), -1, axis=axis)


def rmsnorm1w(x, w, eps):
    """Gemma RMSNorm over the last axis: x * (1/sqrt(mean(x^2) + eps)) * (1 + w), fp32, to BF16"""
    sq = (x * x).astype(F32)  # x.pow(2) in fp32
    var = seq_sum_f64(sq).astype(F32) / F32(x.shape[-1])
    r = F32(1) / np.sqrt((var + F32(eps)).astype(F32))
    return bf16((x * r[..., None]).astype(F32) * (F32(1) + w).astype(F32))


_TRIG = {}


def rope_cos_sin(theta, rd, pos):
    """BF16 cos and sin at position pos: inv_freq = 1 / theta^(2i/rd) and the angle in fp32,
    cos / sin of it (C library, binary64) rounded to fp32, then to BF16"""
    key = (theta, rd, pos)
    if key not in _TRIG:
        cs, sn = [], []
        for i in range(rd // 2):
            e = F32(2 * i) / F32(rd)
            p = F32(math.pow(float(F32(theta)), float(e)))
            inv = F32(1) / p
            ang = F32(pos) * inv
            cs.append(F32(math.cos(float(ang))))
            sn.append(F32(math.sin(float(ang))))
        _TRIG[key] = (bf16(np.array(cs, dtype=F32)), bf16(np.array(sn, dtype=F32)))
    return _TRIG[key]


def rope_tables(theta, rd, positions):
    pairs = [rope_cos_sin(theta, rd, p) for p in positions]
    if not pairs:
        return np.zeros((0, rd // 2), F32), np.zeros((0, rd // 2), F32)
    return np.stack([c for c, _ in pairs]), np.stack([s for _, s in pairs])


def rope(x, rd, cs, sn):
    """NeoX rotate_half on x[..., :rd], BF16 tensors: each product and the sum rounded to BF16"""
    if rd == 0:
        return x
    h = rd // 2
    x = x.copy()
    a, b = x[..., :h].copy(), x[..., h:rd].copy()
    x[..., :h] = bf16(bf16(a * cs) + bf16(-b * sn))
    x[..., h:rd] = bf16(bf16(b * cs) + bf16(a * sn))
    return x


def block_quant(lib, fmt, recipe, d, row):
    codes = (ctypes.c_uint8 * (d + 8))()
    scales = (ctypes.c_uint8 * (d // 16 + 8))()
    why = ctypes.create_string_buffer(256)
    gs = GlobalScale(1.0, 1.0)
    x = np.ascontiguousarray(row, dtype=F32)
    rc = lib.lowp_block_quantize(BLOCK_FORMAT[fmt], recipe, gs, 0, x.ctypes.data_as(ctypes.c_void_p),
                                 ctypes.c_size_t(d), codes, scales, None, why, 256)
    if rc != 0:
        raise RuntimeError(why.value.decode())
    out = np.zeros(d, dtype=np.float64)
    lib.lowp_block_dequantize_f64(BLOCK_FORMAT[fmt], ctypes.c_float(1.0), codes, scales, ctypes.c_size_t(d),
                                  out.ctypes.data_as(ctypes.c_void_p))
    return out


def oracle(lib, cfg, keys, recipe, kraw, wk, q, wq, pos):
    H, d, rd, R, K = cfg["heads"], cfg["d"], cfg["rd"], cfg["ratio"], cfg["topk"]
    T = kraw.shape[0]
    nb = T // R
    s = np.zeros((nb, d), dtype=F32)
    groups = kraw[:nb * R].reshape(nb, R, d)
    for t in range(R):  # the compression kernel's fp32 accumulation, token order
        s = (s + groups[:, t, :]).astype(F32)
    m = bf16(s / F32(R))
    rows = rmsnorm1w(m, wk, cfg["eps"])
    cs, sn = rope_tables(cfg["theta"], rd, [b * R for b in range(nb)])
    rows = rope(rows, rd, cs, sn)
    if keys == "bf16":
        kb = rows.astype(np.float64)
    elif keys == "e4m3":
        kb = e4m3(rows).astype(np.float64)
    elif nb:
        kb = block_quant(lib, keys, recipe, nb * d, rows.reshape(-1)).reshape(nb, d)
    else:
        kb = np.zeros((0, d), dtype=np.float64)
    cs, sn = rope_cos_sin(cfg["theta"], rd, pos)
    qo = rope(rmsnorm1w(q, wq, cfg["eps"]), rd, cs, sn)
    if keys == "e4m3":
        qo = e4m3(qo)
    vis = min((pos + 1) // R, T // R)
    dots = seq_sum_f64(qo[:, None, :].astype(np.float64) * kb[None, :vis, :]).astype(F32)  # [H, vis]
    relu = np.where(dots > 0, dots, np.where(np.isnan(dots), dots, F32(0))).astype(F32)
    sc = seq_sum_f64(relu.T).astype(F32) if vis else np.zeros(0, dtype=F32)
    if cfg["divide"]:
        sc = (sc / np.sqrt(F32(d))).astype(F32)
    if np.isnan(sc).any():
        return kb, qo, sc, None, None
    order = np.lexsort((np.arange(vis), -sc.astype(np.float64)))  # score descending, index ascending
    blocks = order[:min(K, vis)]
    W = K * R + R - 1
    index = [int(b) * R + t for b in sorted(blocks) for t in range(R)]
    index += list(range(vis * R, pos + 1))
    count = len(index)
    index += [-1] * (W - count) + [count]
    return kb, qo, sc, blocks, np.array(index, dtype=np.int32)


def run_case(lib, rng, case_no, fails):
    kind = rng.integers(0, 8)
    H = int(rng.choice([1, 2, 4, 4, 4, 5]))
    d = int(rng.choice([32, 64, 128, 128, 128, 256]))
    keys = str(rng.choice(["bf16", "bf16", "e4m3", "e4m3", "nvfp4", "mxfp4", "mxfp8"]))
    if keys in BLOCK_SIZE and d % BLOCK_SIZE[keys]:
        d = 128
    rd = int(rng.choice([0, 2, d // 2, d // 2, d]))
    rd -= rd % 2
    R = int(rng.choice([1, 2, 4, 4, 4, 8]))
    T = int(rng.integers(1, 700))
    K = int(rng.choice([1, 3, 16, 64, 512, 600]))
    cfg = {"heads": H, "d": d, "rd": rd, "ratio": R, "topk": K, "divide": int(rng.integers(0, 2)),
           "theta": float(rng.choice([1e4, 1e5, 1e7])), "eps": float(rng.choice([1e-6, 1e-5, 0.0]))}
    recipe = int(rng.choice(RECIPES[keys])) if keys in RECIPES else 0
    scale = float(2.0 ** rng.integers(-20, 12))
    kraw = bf16(rng.standard_normal((T, d)).astype(F32) * F32(scale))
    if kind == 1 and T >= 2 * R:  # exact ties: every block the same group of keys
        g = kraw[:R].copy()
        for b in range(T // R):
            kraw[b * R:(b + 1) * R] = g
    if kind == 2:  # zero keys in some groups
        kraw[rng.integers(0, T, size=T // 3)] = 0
    if kind == 3:  # huge: E4M3 beyond 464 (NaN), BF16 near its top
        kraw = bf16(kraw * F32(2.0 ** 100))
    if kind == 4:  # tiny: norms of subnormal-ish magnitudes
        kraw = bf16(kraw * F32(2.0 ** -100))
    wk = bf16(rng.standard_normal(d).astype(F32) * F32(0.1))
    wq = bf16(rng.standard_normal(d).astype(F32) * F32(0.1))
    if kind == 5:  # 1 + w = 0 on some dims
        wk[rng.integers(0, d, size=d // 4)] = -1
    q = bf16(rng.standard_normal((H, d)).astype(F32) * F32(float(2.0 ** rng.integers(-8, 8))))
    if kind == 6:  # a query that makes every score 0 (ReLU of negatives or 0): all ties
        q[:] = 0
    pos = int(rng.integers(0, T))
    if kind == 7:
        pos = T - 1

    c = QsaConfig(H, d, rd, R, K, cfg["divide"], cfg["theta"], cfg["eps"], KEYS[keys], recipe,
                  GlobalScale(1.0, 1.0))
    why = ctypes.create_string_buffer(256)
    nb = T // R
    kb_c = np.zeros((max(nb, 1), d), dtype=np.float64)
    kr = np.ascontiguousarray(kraw, dtype=F32)
    rc = lib.lowp_qsa_compress(ctypes.byref(c), kr.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(T),
                               wk.ctypes.data_as(ctypes.c_void_p), kb_c.ctypes.data_as(ctypes.c_void_p), why, 256)
    qo_c = np.zeros((H, d), dtype=F32)
    rc |= lib.lowp_qsa_query(ctypes.byref(c), np.ascontiguousarray(q).ctypes.data_as(ctypes.c_void_p),
                             ctypes.c_size_t(pos), wq.ctypes.data_as(ctypes.c_void_p),
                             qo_c.ctypes.data_as(ctypes.c_void_p), why, 256)
    if rc:
        fails.append(f"case {case_no}: lowp refused: {why.value.decode()}")
        return
    sc_c = np.zeros(max(nb, 1), dtype=F32)
    vis = ctypes.c_size_t(0)
    rc = lib.lowp_qsa_scores(ctypes.byref(c), qo_c.ctypes.data_as(ctypes.c_void_p),
                             kb_c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(T), ctypes.c_size_t(pos),
                             sc_c.ctypes.data_as(ctypes.c_void_p), ctypes.byref(vis), why, 256)
    kb_o, qo_o, sc_o, blocks_o, index_o = oracle(lib, cfg, keys, recipe, kraw, wk, q, wq, pos)
    tag = f"case {case_no} (kind {kind}, H {H} d {d} rd {rd} R {R} T {T} k {K} pos {pos} keys {keys})"
    if rc or vis.value != len(sc_o):
        fails.append(f"{tag}: scores refused or visible {vis.value} vs {len(sc_o)}: {why.value.decode()}")
        return
    if nb and not same(kb_c[:nb], kb_o, np.uint64).all():
        i = np.argwhere(~same(kb_c[:nb], kb_o, np.uint64))[0]
        fails.append(f"{tag}: key block {tuple(i)}: lowp {kb_c[tuple(i)]!r} numpy {kb_o[tuple(i)]!r}")
        return
    if not same(qo_c, qo_o.astype(F32), np.uint32).all():
        fails.append(f"{tag}: prepared query differs")
        return
    n = vis.value
    if not same(sc_c[:n], sc_o, np.uint32).all():
        i = int(np.argwhere(~same(sc_c[:n], sc_o, np.uint32))[0][0])
        fails.append(f"{tag}: score {i}: lowp {sc_c[i]!r} numpy {sc_o[i]!r}")
        return
    W = K * R + R - 1
    index_c = np.zeros(W + 1, dtype=np.int32)
    blocks_c = np.zeros(K, dtype=np.int32)
    nsel = ctypes.c_size_t(0)
    rc = lib.lowp_qsa_select(ctypes.byref(c), sc_c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n),
                             ctypes.c_size_t(pos), index_c.ctypes.data_as(ctypes.c_void_p),
                             blocks_c.ctypes.data_as(ctypes.c_void_p), ctypes.byref(nsel), why, 256)
    if blocks_o is None:  # a NaN score: lowp must refuse, with a reason
        if rc == 0 or b"NaN" not in why.value:
            fails.append(f"{tag}: NaN score not refused")
        return "nan"
    if rc:
        fails.append(f"{tag}: select refused: {why.value.decode()}")
        return
    if not np.array_equal(blocks_c[:nsel.value], blocks_o):
        fails.append(f"{tag}: selected blocks differ: lowp {blocks_c[:8]} numpy {blocks_o[:8]}")
        return
    if not np.array_equal(index_c, index_o):
        fails.append(f"{tag}: index list differs")
        return
    return "tie" if n > K and len(np.unique(sc_o)) < n else "ok"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else os.environ.get("LOWP_SEED", "0x6c6f7770")
    seed = int(seed, 0)
    lib = ctypes.CDLL(a.lib)
    for name in ("lowp_qsa_compress", "lowp_qsa_query", "lowp_qsa_scores", "lowp_qsa_select",
                 "lowp_block_quantize", "lowp_block_dequantize_f64"):
        getattr(lib, name).restype = ctypes.c_int
    rng = np.random.default_rng(seed)
    print(f"interop_select: seed {seed:#x}, {a.cases} cases", file=sys.stderr)
    fails, kinds = [], {}
    for i in range(a.cases):
        r = run_case(lib, rng, i, fails)
        kinds[r] = kinds.get(r, 0) + 1
        if len(fails) >= 20:
            break
    for f in fails:
        print(f)
    print(f"interop_select: {a.cases - len(fails)} equal, {len(fails)} differ "
          f"(with ties beyond k: {kinds.get('tie', 0)}, NaN scores refused: {kinds.get('nan', 0)})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
