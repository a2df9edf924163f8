#!/usr/bin/env python3
"""interop_select: lowp's selector models (lowp/select.h) against independent numpy
implementations of the same references, written here from the cited sources
(ref/notes/selection.md), not from lowp's C. Three kinds of case, in turn:

  QSA  (Hugging Face qwen4_exp Qwen4ExpTextQSAIndexer.forward; vLLM's compression kernel):
       the compressed index keys (mean over `ratio` tokens, BF16, Gemma RMSNorm with
       (1 + w), partial NeoX RoPE with per-op BF16 rounding, the key format), the prepared
       queries, every block score, the selected blocks and the production index list
       (selected blocks ascending, the open tail, -1 padding, the count column);
  DSA  (DeepSeek-V3.2 act_quant / fp8_index; DeepGEMM's FP4 index-K): the quantized keys
       and scales, every score, the top-k;
  MoBA / NSA (moba_naive; FLA's parallel_nsa_kernel_topk with the paper's forced blocks):
       every block score per selection unit and each unit's top-k;
  sparse attention (vLLM qwen4_exp qsa_sparse_paged_attention, the definition lowp/select.h
       states step by step): every output element of the BF16 and FP8 production paths over
       raw inputs and over a quantized cache's elements (FP8 codes, E2M1 x block scales past
       fp16's range and into its subnormals), ties, underflowing exp2, zero queries, gates;
all bit for bit. Where a reference leaves a reduction order open (torch's fp32
reductions) both sides use the rule lowp/select.h states: binary64 in index order from
+0, rounded once to binary32. numpy gives the binary32 arithmetic and ml_dtypes the BF16 /
E4M3 / E2M1 casts (lowp's torch profile equals torch on every input:
reports/torch-check-h200.md; NaN signs and payloads aside, which differ between torch and
ml_dtypes and never matter here); cos, sin, pow, exp and log come from Python's math
module, the C library's functions, as lowp calls them. NVFP4 / MXFP4 / MXFP8 QSA index
keys are lowp's own options with no outside reference: their block quantization is
lowp_block_quantize (proven against MPFR elsewhere), called through ctypes.

Cases are random geometries (head counts, dims, ratios, block sizes, top-k, formats,
profiles, GQA groups 1-16) and adversarial inputs: exact ties (repeated keys or blocks),
all-zero scores (the tie rule alone decides), keys below the amax floors, E2M1 midpoints,
huge keys (E4M3 beyond 464 is NaN: the NaN score must be refused), zero and tiny keys.
--cases N (default 2000; the full tier runs 100000). Exit 0 all equal, 1 on a difference,
77 when numpy or ml_dtypes is missing. Seed: --seed, else LOWP_SEED (decimal or 0x hex),
else 0x6c6f7770.
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
    """binary64 sum in index order starting from +0 (cumsum is sequential), as float64"""
    a = np.asarray(a, dtype=np.float64)
    a = np.moveaxis(a, axis, -1)
    z = np.zeros(a.shape[:-1] + (1,), dtype=np.float64)
    return np.cumsum(np.concatenate([z, a], axis=-1), axis=-1)[..., -1]


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
                               wk.ctypes.data_as(ctypes.c_void_p), kb_c.ctypes.data_as(ctypes.c_void_p), None, why, 256)
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


# ---------------------------------------------------------------- DSA

class DsaConfig(ctypes.Structure):
    _fields_ = [("heads", ctypes.c_size_t), ("head_dim", ctypes.c_size_t), ("topk", ctypes.c_size_t),
                ("ue8m0", ctypes.c_int), ("q_floor", ctypes.c_float), ("k_floor", ctypes.c_float),
                ("keys", ctypes.c_int), ("fp4_round", ctypes.c_int)]


def pow2_ceil(x):
    """fast_round_scale's exponent-bit ceil: 2^(exponent + (fraction != 0)), x float32 > 0"""
    b = np.asarray(x, dtype=F32).view(np.uint32)
    e = ((b >> 23) & 0xFF).astype(np.int64) - 127 + ((b & 0x7FFFFF) != 0)
    return ((e + 127).astype(np.uint32) << 23).view(F32)


def act_quant(x, floor, ue8m0):
    """DeepSeek act_quant per row (block = the row): amax floor, scale, clamp(x / s), e4m3"""
    amax = np.max(np.abs(x), axis=-1)  # NaN propagates, as torch.max
    amax = np.where(np.isnan(amax), amax, np.maximum(amax, F32(floor))).astype(F32)
    s = (amax * F32(1 / 448)).astype(F32)
    if ue8m0:
        s = np.where(np.isnan(s) | np.isinf(s), s, pow2_ceil(s)).astype(F32)
    y = (x / s[..., None]).astype(F32)
    y = np.where(np.isnan(y), y, np.clip(y, F32(-448), F32(448))).astype(F32)
    return e4m3(y), s


E2M1_BOUNDS = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=F32)


def fp4_keys(k, deepgemm):
    """DeepGEMM per_token_cast_to_fp4 (use_ue8m0, gran_k 32): values e2m1 x sf"""
    T, d = k.shape
    g = k.reshape(T, d // 32, 32)
    amax = np.max(np.abs(g), axis=-1)
    nan = np.isnan(amax)
    t = (np.maximum(np.where(nan, F32(0), amax), F32(1e-4)) / F32(6)).astype(F32)
    b = t.view(np.uint32)
    code = ((b >> 23) & 0xFF).astype(np.int64) + ((b & 0x7FFFFF) != 0)
    code = np.clip(code, 1, 254)
    sf = (code.astype(np.uint32) << 23).view(F32)
    v = (g / sf[..., None]).astype(F32)
    if deepgemm:
        a = np.abs(v)
        c = sum((a > F32(bd)).astype(np.int64) for bd in E2M1_BOUNDS)
        e = E2M1_VALUES[c]
        e = np.where((v < 0) & (c != 0), -e, e).astype(F32)
    else:
        e = v.astype(ml_dtypes.float4_e2m1fn).astype(F32)  # nearest even, saturating
    out = (e * sf[..., None]).astype(F32)
    out = np.where(nan[..., None], F32(np.nan), out)
    return out.reshape(T, d), np.ones(T, dtype=F32)


def dsa_oracle(cfg, q, w, k, pos):
    H, d = cfg["heads"], cfg["d"]
    if cfg["keys"] == 0:
        kq, ks = act_quant(k, cfg["k_floor"], cfg["ue8m0"])
    elif cfg["keys"] == 1:
        kq, ks = fp4_keys(k, cfg["fp4_round"] == 1)
    else:  # unquantized
        kq, ks = k.copy(), np.ones(k.shape[0], dtype=F32)
    if cfg["keys"] == 2:
        qq, qs = q.copy(), np.ones(H, dtype=F32)
    else:
        qq, qs = act_quant(q, cfg["q_floor"], cfg["ue8m0"])
    wb = bf16((w * F32(H ** -0.5)).astype(F32))
    wh = ((wb * qs).astype(F32) * F32(d ** -0.5)).astype(F32)
    vis = pos + 1
    dots = seq_sum_f64(kq[:vis, None, :].astype(np.float64) * qq[None, :, :].astype(np.float64)).astype(F32)
    relu = np.where(dots > 0, dots, np.where(np.isnan(dots), dots, F32(0))).astype(F32)
    sc = (seq_sum_f64((relu * wh[None, :]).astype(F32)).astype(F32) * ks[:vis]).astype(F32)
    return kq, ks, sc


def run_dsa_case(lib, rng, case_no, fails):
    kind = int(rng.integers(0, 6))
    H = int(rng.choice([1, 4, 8, 64]))
    d = int(rng.choice([32, 64, 128, 128]))
    keys = int(rng.integers(0, 3))
    cfg = {"heads": H, "d": d, "keys": keys, "fp4_round": int(rng.integers(0, 2)),
           "ue8m0": int(rng.integers(0, 2)), "q_floor": float(rng.choice([1e-4, 1e-10])), "k_floor": 1e-4,
           "topk": int(rng.choice([1, 16, 64, 2048]))}
    T = int(rng.integers(1, 400))
    k = bf16(rng.standard_normal((T, d)).astype(F32) * F32(float(2.0 ** rng.integers(-12, 8))))
    q = bf16(rng.standard_normal((H, d)).astype(F32) * F32(float(2.0 ** rng.integers(-12, 8))))
    w = bf16(rng.standard_normal(H).astype(F32))
    if kind == 1:  # ties: repeated keys
        k[1::2] = k[0::2][:T // 2]
    if kind == 2:  # rows below the amax floor: the floor sets the scale
        k[rng.integers(0, T, size=T // 2)] *= F32(2.0 ** -40)
        k = bf16(k)
    if kind == 3:  # FP4 midpoints: values on E2M1 boundaries after the group scale
        grid = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, -0.75, -2.5, -5.0, 0.0], dtype=F32)
        k = bf16(grid[rng.integers(0, len(grid), size=(T, d))] * F32(2.0 ** int(rng.integers(-4, 4))))
    if kind == 4:  # zero query heads and negative weights
        q[rng.integers(0, H)] = 0
        w = -np.abs(w)
    pos = int(rng.integers(0, T))
    c = DsaConfig(H, d, cfg["topk"], cfg["ue8m0"], cfg["q_floor"], cfg["k_floor"], keys, cfg["fp4_round"])
    why = ctypes.create_string_buffer(256)
    kq_c = np.zeros((T, d), dtype=F32)
    ks_c = np.zeros(T, dtype=F32)
    kk = np.ascontiguousarray(k, dtype=F32)
    rc = lib.lowp_dsa_keys_quantize(ctypes.byref(c), kk.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(T),
                                    kq_c.ctypes.data_as(ctypes.c_void_p), ks_c.ctypes.data_as(ctypes.c_void_p),
                                    None, why, 256)
    sc_c = np.zeros(T, dtype=F32)
    vis = ctypes.c_size_t(0)
    qq = np.ascontiguousarray(q, dtype=F32)
    ww = np.ascontiguousarray(w, dtype=F32)
    rc |= lib.lowp_dsa_scores(ctypes.byref(c), qq.ctypes.data_as(ctypes.c_void_p),
                              ww.ctypes.data_as(ctypes.c_void_p), kq_c.ctypes.data_as(ctypes.c_void_p),
                              ks_c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(T), ctypes.c_size_t(pos),
                              sc_c.ctypes.data_as(ctypes.c_void_p), ctypes.byref(vis), why, 256)
    tag = f"dsa case {case_no} (kind {kind}, H {H} d {d} keys {keys} round {cfg['fp4_round']} ue8m0 {cfg['ue8m0']} T {T} pos {pos})"
    if rc:
        fails.append(f"{tag}: lowp refused: {why.value.decode()}")
        return
    kq_o, ks_o, sc_o = dsa_oracle(cfg, q, w, k, pos)
    if not same(kq_c, kq_o, np.uint32).all() or not same(ks_c, ks_o, np.uint32).all():
        i = np.argwhere(~same(kq_c, kq_o, np.uint32))
        at = tuple(i[0]) if len(i) else "scale"
        fails.append(f"{tag}: quantized key {at} differs")
        return
    n = vis.value
    if n != len(sc_o) or not same(sc_c[:n], sc_o, np.uint32).all():
        i = int(np.argwhere(~same(sc_c[:n], sc_o, np.uint32))[0][0]) if n == len(sc_o) else -1
        fails.append(f"{tag}: score {i} differs: lowp {sc_c[i]!r} numpy {sc_o[i]!r}")
        return
    # the selection: top-k with the tie rule, through lowp_topk, against a lexsort
    K = cfg["topk"]
    idx = np.zeros(K, dtype=np.int32)
    cnt = ctypes.c_size_t(0)
    rc = lib.lowp_topk(sc_c.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n), ctypes.c_size_t(K),
                       idx.ctypes.data_as(ctypes.c_void_p), ctypes.byref(cnt), why, 256)
    if np.isnan(sc_o).any():
        if rc == 0:
            fails.append(f"{tag}: NaN score not refused")
        return "nan"
    order = np.lexsort((np.arange(n), -sc_o.astype(np.float64)))[:min(K, n)]
    if rc or not np.array_equal(idx[:cnt.value], order):
        fails.append(f"{tag}: top-{K} differs")
        return
    return "ok"


# ---------------------------------------------------------------- MoBA / NSA

class BlockselConfig(ctypes.Structure):
    _fields_ = [("method", ctypes.c_int), ("q_heads", ctypes.c_size_t), ("kv_heads", ctypes.c_size_t),
                ("head_dim", ctypes.c_size_t), ("block", ctypes.c_size_t), ("topk", ctypes.c_size_t),
                ("sink_blocks", ctypes.c_size_t), ("local_blocks", ctypes.c_size_t)]


def blocksel_oracle(cfg, q, k, pos):
    B, Hq, Hk, d = cfg["block"], cfg["hq"], cfg["hk"], cfg["d"]
    G = Hq // Hk
    T = k.shape[0]
    cur = pos // B
    nb = cur + 1
    kbar = np.zeros((nb, Hk, d), dtype=F32)
    for i in range(nb):
        blk = k[i * B:min(i * B + B, T)]  # [n, Hk, d]
        kbar[i] = bf16(seq_sum_f64(np.moveaxis(blk, 0, -1)).astype(F32) / F32(blk.shape[0]))
    def dot(a, b):
        return seq_sum_f64(a.astype(np.float64) * b.astype(np.float64)).astype(F32)
    if cfg["method"] == 0:  # MoBA: per query head
        out = np.zeros((Hq, nb), dtype=F32)
        for h in range(Hq):
            for i in range(cur):
                out[h, i] = dot(q[h], kbar[i, h // G])
            out[h, cur] = np.inf
        return out
    out = np.zeros((Hk, nb), dtype=F32)
    nc = (pos + 1) // B
    sm = F32(1.0 / math.sqrt(d))
    for g in range(Hk):
        acc = np.zeros(nb, dtype=np.float64)
        for hh in range(G):
            h = g * G + hh
            sv = [F32(dot(q[h], kbar[i, g]) * sm) for i in range(nc)]
            m = max([float(v) for v in sv], default=-math.inf)
            lse = m + math.log(sum(math.exp(float(v) - m) for v in sv)) if nc else 0.0
            for i in range(min(cur, nc)):
                acc[i] += float(F32(math.exp(float(sv[i]) - lse)))
        # acc was summed head by head from +0 in binary64: the rule
        out[g] = acc.astype(F32)
        out[g, :min(cfg["sink"], nb)] = np.inf
        for j in range(min(cfg["local"], cur + 1)):
            out[g, cur - j] = np.inf
    return out


def run_blocksel_case(lib, rng, case_no, fails):
    method = int(rng.integers(0, 2))
    Hk = int(rng.choice([1, 2, 3, 8]))
    G = int(rng.choice([1, 2, 5, 6, 16]))
    d = int(rng.choice([16, 64, 128]))
    B = int(rng.choice([1, 4, 16, 64]))
    T = int(rng.integers(1, 600))
    cfg = {"method": method, "hq": Hk * G, "hk": Hk, "d": d, "block": B, "topk": int(rng.choice([1, 3, 8, 16])),
           "sink": int(rng.choice([0, 1])) if method else 0, "local": int(rng.choice([1, 2])) if method else 1}
    k = bf16(rng.standard_normal((T, Hk, d)).astype(F32) * F32(float(2.0 ** rng.integers(-6, 6))))
    if rng.integers(0, 4) == 0:  # ties: a repeated block
        k[B:2 * B] = k[:B][:len(k[B:2 * B])]
    q = bf16(rng.standard_normal((Hk * G, d)).astype(F32))
    pos = int(rng.integers(0, T))
    c = BlockselConfig(method, Hk * G, Hk, d, B, cfg["topk"], cfg["sink"], cfg["local"])
    why = ctypes.create_string_buffer(256)
    units = Hk * G if method == 0 else Hk
    nb = pos // B + 1
    sc_c = np.zeros((units, nb), dtype=F32)
    n = ctypes.c_size_t(0)
    kk = np.ascontiguousarray(k, dtype=F32)
    qq = np.ascontiguousarray(q, dtype=F32)
    rc = lib.lowp_blocksel_scores(ctypes.byref(c), qq.ctypes.data_as(ctypes.c_void_p),
                                  kk.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(T), ctypes.c_size_t(pos),
                                  sc_c.ctypes.data_as(ctypes.c_void_p), ctypes.byref(n), why, 256)
    tag = f"blocksel case {case_no} ({'nsa' if method else 'moba'}, Hk {Hk} G {G} d {d} B {B} T {T} pos {pos})"
    if rc or n.value != nb:
        fails.append(f"{tag}: lowp refused or {n.value} blocks: {why.value.decode()}")
        return
    sc_o = blocksel_oracle(cfg, q, k, pos)
    if not same(sc_c, sc_o, np.uint32).all():
        i = tuple(np.argwhere(~same(sc_c, sc_o, np.uint32))[0])
        fails.append(f"{tag}: score {i}: lowp {sc_c[i]!r} numpy {sc_o[i]!r}")
        return
    K = cfg["topk"]
    for u in range(units):
        idx = np.zeros(K, dtype=np.int32)
        cnt = ctypes.c_size_t(0)
        row = np.ascontiguousarray(sc_c[u])
        rc = lib.lowp_topk(row.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(nb), ctypes.c_size_t(K),
                           idx.ctypes.data_as(ctypes.c_void_p), ctypes.byref(cnt), why, 256)
        order = np.lexsort((np.arange(nb), -sc_o[u].astype(np.float64)))
        order = order[np.isfinite(sc_o[u][order]) | (sc_o[u][order] > 0)][:K]  # -Inf never selected
        if rc or not np.array_equal(idx[:cnt.value], order):
            fails.append(f"{tag}: unit {u}: top-{K} differs")
            return
    return "ok"


# ---------------------------------------------------------------- sparse attention

class SparseArgs(ctypes.Structure):
    _fields_ = [("path", ctypes.c_int), ("dim", ctypes.c_size_t), ("k_scale", ctypes.c_double),
                ("v_scale", ctypes.c_double)]


def f16(x):
    return np.asarray(x, dtype=F32).astype(np.float16).astype(F32)  # IEEE nearest even, overflow to Inf


def sparse_oracle(path, k_scale, v_scale, q, k, v, gate):
    """QSA's production sparse attention (vLLM qwen4_exp qsa_sparse_paged_attention, as
    lowp/select.h states it step by step), one tile and one split: path 1 BF16, 2 FP8"""
    n, d = k.shape
    fp8 = path == 2
    ks, vs = (k_scale, v_scale) if fp8 else (1.0, 1.0)
    softmax_scale = F32(d ** -0.5 * ks)  # 1. host scales, Python floats passed as fp32
    score_scale = F32(softmax_scale * F32(1.4426950408889634))
    output_scale = F32(vs)
    qb, kb = bf16(q), bf16(k)  # 2. q, K in BF16; V in fp16 (FP8 mode) or BF16
    vb = f16(v) if fp8 else bf16(v)
    if n:
        dots = seq_sum_f64(qb[None, :].astype(np.float64) * kb.astype(np.float64)).astype(F32)
        s = (dots * score_scale).astype(F32)  # 3.
        m = np.max(s)
        p = np.array([F32(math.exp2(float(F32(x - m)))) for x in s], dtype=F32)  # 4.
        l = F32(seq_sum_f64(p))
        P = f16(p) if fp8 else bf16(p)  # 5. P in V's dtype
        acc = seq_sum_f64(P[:, None].astype(np.float64) * vb.astype(np.float64), axis=0).astype(F32)
        inv = F32(output_scale / max(l, F32(1e-20)))  # 6.
        o = (acc * inv).astype(F32)
    else:  # the kernel's has_values guard
        o = np.zeros(d, dtype=F32)
    ob = bf16(o)  # 7.
    if gate is None:
        return ob
    g = bf16(gate)
    sig = np.array([F32(1.0 / (1.0 + math.exp(-float(x)))) for x in g], dtype=F32)
    return (ob * sig).astype(F32)


def cache_elements(rng, shape, fmt):
    """values a quantized cache gives the attention: E4M3 / E5M2 codes, or E2M1 elements times
    power-of-two block scales that reach past fp16's range (Inf) and into its subnormals"""
    x = rng.standard_normal(shape).astype(F32)
    if fmt == 0:
        return x.astype(ml_dtypes.float8_e4m3fn).astype(F32) * F32(float(2.0 ** rng.integers(-6, 6)))
    if fmt == 1:
        return (x * F32(2.0 ** 10)).astype(ml_dtypes.float8_e5m2).astype(F32)
    e = (x * F32(3)).astype(ml_dtypes.float4_e2m1fn).astype(F32)
    sc = (2.0 ** rng.integers(-30, 18, size=shape[:-1] + (max(shape[-1] // 16, 1),))).astype(F32)
    return (e * np.repeat(sc, 16, axis=-1)[..., :shape[-1]]).astype(F32)


def run_sparse_case(lib, rng, case_no, fails):
    kind = int(rng.integers(0, 6))
    path = int(rng.integers(1, 3))
    d = int(rng.choice([1, 3, 16, 64, 128, 128, 256]))
    n = int(rng.choice([0, 1, 2, int(rng.integers(3, 700))]))
    scale = float(2.0 ** rng.integers(-8, 8))
    q = (rng.standard_normal(d) * scale).astype(F32)
    k = (rng.standard_normal((n, d)) * float(2.0 ** rng.integers(-8, 8))).astype(F32)
    v = (rng.standard_normal((n, d)) * float(2.0 ** rng.integers(-8, 8))).astype(F32)
    if kind == 1:  # the cache's elements (what a quantized cache gives): FP8 codes, E2M1 x scale
        fmt = int(rng.integers(0, 3))
        k, v = cache_elements(rng, (n, d), fmt), cache_elements(rng, (n, d), fmt)
    if kind == 2 and n:  # ties: every key the same, every score equal
        k[:] = k[0]
    if kind == 3:  # huge scores: exp2 underflows to 0 for all but a few
        q = (q * F32(2.0 ** 12)).astype(F32)
    if kind == 4:  # a zero query: every p = 1
        q[:] = 0
    gate = None if rng.integers(0, 3) == 0 else (rng.standard_normal(d) * float(2.0 ** rng.integers(-2, 7))).astype(F32)
    ksc = float(rng.uniform(0.5, 2.0) * 2.0 ** rng.integers(-10, 6))
    vsc = float(rng.uniform(0.5, 2.0) * 2.0 ** rng.integers(-10, 6))
    a = SparseArgs(path, d, ksc, vsc)
    out = np.zeros(d, dtype=np.float64)
    why = ctypes.create_string_buffer(256)
    kk, vv, qq = (np.ascontiguousarray(x, dtype=F32) for x in (k, v, q))
    gg = None if gate is None else np.ascontiguousarray(gate, dtype=F32)
    rc = lib.lowp_sparse_attn(ctypes.byref(a), qq.ctypes.data_as(ctypes.c_void_p), kk.ctypes.data_as(ctypes.c_void_p),
                              vv.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(n),
                              None if gg is None else gg.ctypes.data_as(ctypes.c_void_p),
                              out.ctypes.data_as(ctypes.c_void_p), why, 256)
    tag = f"sparse case {case_no} (kind {kind}, {'fp8' if path == 2 else 'bf16'} d {d} n {n} gate {gate is not None})"
    if rc:
        fails.append(f"{tag}: lowp refused: {why.value.decode()}")
        return
    o = sparse_oracle(path, ksc, vsc, q, k, v, gate).astype(np.float64)
    ok = same(out, o, np.uint64)
    if not ok.all():
        i = int(np.argwhere(~ok)[0][0])
        fails.append(f"{tag}: output {i}: lowp {out[i]!r} numpy {o[i]!r}")
        return
    return "attn"


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
                 "lowp_block_quantize", "lowp_block_dequantize_f64", "lowp_dsa_keys_quantize",
                 "lowp_dsa_scores", "lowp_topk", "lowp_blocksel_scores", "lowp_sparse_attn"):
        getattr(lib, name).restype = ctypes.c_int
    rng = np.random.default_rng(seed)
    print(f"interop_select: seed {seed:#x}, {a.cases} cases", file=sys.stderr)
    fails, kinds = [], {}
    for i in range(a.cases):
        r = (run_case, run_dsa_case, run_blocksel_case, run_sparse_case)[i % 4](lib, rng, i, fails)
        kinds[r] = kinds.get(r, 0) + 1
        if len(fails) >= 20:
            break
    for f in fails:
        print(f)
    print(f"interop_select: {a.cases - len(fails)} equal, {len(fails)} differ "
          f"(with ties beyond k: {kinds.get('tie', 0)}, NaN scores refused: {kinds.get('nan', 0)}, "
          f"sparse attention outputs: {kinds.get('attn', 0)})")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
