"""lowp: certify a paged-decode (or extend / prefill) attention kernel against the arithmetic it declares.

A thin ctypes binding of liblowp (lowp/certify.h, lowp/block.h): every computation is the C
library's; this module only hands it the framework's tensors as they sit in memory (numpy
arrays, or torch tensors moved to the CPU; contiguous ones are passed without a copy).

    cert = lowp.certify("vllm-fp8", key_cache, value_cache, k_scale=ks, v_scale=vs,
                        block_table=bt, seq_lens=sl, query=q, output=o,
                        q_dtype="bf16", p_dtype="bf16", out_dtype="bf16")
    cert.ok, cert.counts, cert.worst, cert.diagnosis

The library is found at $LOWP_LIBRARY, next to this file (a `pip install .` copies it
here), or in the build tree of a source checkout (build/ref/liblowp.so).
"""

import ctypes
import os
import pathlib

import numpy as np

__all__ = ["certify", "quantize", "Certificate", "LAYOUTS", "DTYPES", "RECIPES", "library_path"]

LAYOUTS = ("vllm-fp8", "flashinfer", "sglang-nvfp4", "trtllm")
DTYPES = ("f32", "bf16", "f16", "e4m3")
VERDICTS = ("exact", "within", "outside", "nan-mismatch")
_BLOCK_FORMATS = {"nvfp4": 0, "mxfp4": 1, "mxfp8": 2, "fp8_e4m3": 3, "fp8_e5m2": 4, "bf16": 5}
# lowp/block.h lowp_recipe, in enum order; quantize() takes a name or the enum value
RECIPES = ("trtllm", "exact", "modelopt", "ocp", "rceil", "sglang-kv", "torchao", "torchao-floor",
           "torchao-ceil", "torchao-even", "torchao-rceil", "compressed-tensors")
NAN_CANONICAL = 2  # LOWP_BLOCK_NAN_CANONICAL: NaN element values as CUDA makes them
CUDA_SCALAR_DIV = 4  # LOWP_BLOCK_CUDA_SCALAR_DIV: tensor / Python number as torch CUDA does it (x * RN(1/b))
CUDA_OPS = 8  # LOWP_BLOCK_CUDA_OPS: casts, Triton clamp and exp2(-127) of the CUDA paths
_KV_ORDER = {"nhd": 0, "hnd": 1}
_SF_ORDER = {"linear": 0, "interleave4": 1}


def _find_library():
    env = os.environ.get("LOWP_LIBRARY")
    here = pathlib.Path(__file__).resolve().parent
    cands = [pathlib.Path(env)] if env else []
    cands += sorted(here.glob("liblowp.so*"))
    cands += [here.parent.parent / "build" / "ref" / "liblowp.so"]
    for c in cands:
        if c.is_file():
            return str(c)
    raise ImportError("lowp: liblowp.so not found (set LOWP_LIBRARY, pip install the package, or build the "
                      "checkout: cmake -S . -B build && cmake --build build --target lowp)")


library_path = _find_library()
_lib = ctypes.CDLL(library_path)

_sz, _p, _i, _f, _d = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_double


class _Cache(ctypes.Structure):
    _fields_ = [("layout", _i), ("format", _i), ("code_order", _i), ("sf_order", _i), ("k_sf_order", _i),
                ("v_sf_order", _i), ("num_pages", _sz), ("page_size", _sz), ("num_kv_heads", _sz),
                ("qk_dim", _sz), ("vo_dim", _sz), ("k", _p), ("v", _p), ("k_sf", _p), ("v_sf", _p),
                ("k_scale", _f), ("v_scale", _f), ("batch", _sz), ("block_table", _p), ("max_blocks", _sz),
                ("seq_lens", _p), ("indptr", _p), ("indices", _p), ("last_page_len", _p)]


class _Arith(ctypes.Structure):
    _fields_ = [("q_dtype", _i), ("q_scale", _f), ("p_dtype", _i), ("out_dtype", _i), ("partial_dtype", _i),
                ("split_tokens", _sz), ("mma_k", _sz), ("v_scale_after_output", _i), ("sm_scale", _d),
                ("prod_dtype", _i), ("l_unrounded", _i), ("mma_frac", _i)]


class _Worst(ctypes.Structure):
    _fields_ = [("batch", _sz), ("head", _sz), ("dim", _sz), ("seq_len", _sz), ("q_pos", _sz), ("row", _sz),
                ("got", _d), ("exact", _d),
                ("ref_err", _d), ("bound", _d), ("ratio", _d), ("verdict", _i)]


class _Result(ctypes.Structure):
    _fields_ = [("outputs", _sz), ("counts", _sz * 4), ("oracle_rows", _sz), ("worst_ratio", _d),
                ("n_worst", _sz), ("worst", _Worst * 16), ("diagnosis", ctypes.c_char * 512)]


class _Args(ctypes.Structure):
    _fields_ = [("cache", _Cache), ("arith", _Arith), ("num_q_heads", _sz), ("q", _p), ("out", _p),
                ("only_seq", ctypes.c_long), ("diagnose", _i), ("threads", _i), ("n_worst", _sz),
                ("exact", _p), ("bound", _p), ("verdict", _p), ("qo_indptr", _p),
                ("causal_extra", _sz)]


class _GlobalScale(ctypes.Structure):
    _fields_ = [("dec", _f), ("enc", _f)]


_lib.lowp_certify_abi_size.restype = _sz
_lib.lowp_certify_abi_size.argtypes = [_i]
for _k, _t in enumerate((_Cache, _Arith, _Args, _Result, _Worst)):
    if _lib.lowp_certify_abi_size(_k) != ctypes.sizeof(_t):
        raise ImportError("lowp: %s does not match the library's struct (%d vs %d bytes): rebuild liblowp" %
                          (_t.__name__, ctypes.sizeof(_t), _lib.lowp_certify_abi_size(_k)))
_lib.lowp_certify_cache_init.restype = _Cache
_lib.lowp_certify_cache_init.argtypes = [_i, _sz, _sz, _sz, _sz, _sz]
_lib.lowp_certify_arith_default.restype = _Arith
_lib.lowp_certify_cache_shapes.restype = _i
_lib.lowp_certify_cache_shapes.argtypes = [ctypes.POINTER(_Cache), _i, ctypes.POINTER(_sz), _i,
                                           ctypes.POINTER(_sz), _i, ctypes.POINTER(_sz), _i,
                                           ctypes.POINTER(_sz), _sz, ctypes.c_char_p, _sz]
_lib.lowp_certify_run.restype = _i
_lib.lowp_certify_run.argtypes = [ctypes.POINTER(_Args), ctypes.POINTER(_Result), ctypes.c_char_p, _sz]
_lib.lowp_global_scale_from_dec.restype = _GlobalScale
_lib.lowp_global_scale_from_dec.argtypes = [_i, _i, _f]
_lib.lowp_recipe_default.restype = _i
_lib.lowp_recipe_default.argtypes = [_i]
_lib.lowp_block_quantize.restype = _i
_lib.lowp_block_quantize.argtypes = [_i, _i, _GlobalScale, ctypes.c_uint, _p, _sz, _p, _p, _p,
                                     ctypes.c_char_p, _sz]


def _numpy(x, values=False):
    """A numpy view of x: numpy arrays as they are, torch tensors through .cpu(). Cache
    tensors (values False) keep their bytes: bf16 / fp8 tensors are reinterpreted as
    integers of the same width; query and output tensors (values True) are converted to
    float32, which holds bf16 and f16 exactly."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch, without importing it
        t = x.detach().cpu()
        name = str(t.dtype)
        if values and name in ("torch.bfloat16", "torch.float16"):
            return t.float().numpy()
        if "float8" in name:
            import torch
            return t.view(torch.uint8).numpy()
        if name == "torch.bfloat16":
            import torch
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()
    return np.asarray(x)


def _is_bf16(a):
    return a.dtype.name == "bfloat16"


def _floats(x, name):
    """float32 values of a query or output tensor (bf16 / f16 / f32 are exact in f32)."""
    a = _numpy(x, values=True)
    if _is_bf16(a):
        a = a.astype(np.float32)
    if a.dtype.kind != "f":
        raise ValueError("lowp.certify: %s has dtype %s, expected a float tensor" % (name, a.dtype))
    return np.ascontiguousarray(a, dtype=np.float32)


def _bytes(x, name):
    """The raw bytes of a cache tensor, its shape, and bytes per element (contiguous: no copy)."""
    a = _numpy(x)
    if a.dtype.kind == "f" and a.dtype.itemsize == 4:
        raise ValueError("lowp.certify: %s is float32; pass the cache as stored (uint8 / fp8 / bf16)" % name)
    a = np.ascontiguousarray(a)
    return a, a.shape, a.dtype.itemsize


def _i32(x, name):
    a = np.ascontiguousarray(_numpy(x))
    if a.dtype != np.int32:
        raise ValueError("lowp.certify: %s has dtype %s; FlashInfer and vLLM index with int32" % (name, a.dtype))
    return a


def _dtype(name, what):
    if name not in DTYPES:
        raise ValueError("lowp.certify: %s %r is not one of %s" % (what, name, ", ".join(DTYPES)))
    return DTYPES.index(name)


class Certificate:
    """What lowp.certify found: counts per verdict, the worst elements, the diagnosis, and
    per-output arrays exact (the exact attention, binary64), bound (B) and verdict."""

    def __init__(self, res, exact, bound, verdict):
        self.outputs = res.outputs
        self.counts = {VERDICTS[i]: int(res.counts[i]) for i in range(4)}
        self.oracle_rows = res.oracle_rows
        self.worst_ratio = res.worst_ratio
        self.worst = [{"batch": w.batch, "head": w.head, "dim": w.dim, "seq_len": w.seq_len, "q_pos": w.q_pos,
                       "row": w.row, "got": w.got,
                       "exact": w.exact, "bound": w.bound, "ratio": w.ratio, "verdict": VERDICTS[w.verdict]}
                      for w in res.worst[:res.n_worst]]
        self.diagnosis = res.diagnosis.decode()
        self.exact, self.bound, self.verdict = exact, bound, verdict

    @property
    def ok(self):
        """True when every output is exact or within its bound."""
        return self.counts["outside"] == 0 and self.counts["nan-mismatch"] == 0

    def __repr__(self):
        s = "Certificate(%s, worst ratio %.4g)" % (", ".join("%s %d" % kv for kv in self.counts.items()),
                                                    self.worst_ratio)
        return s + (": " + self.diagnosis if self.diagnosis else "")


def certify(layout, key_cache, value_cache, *, k_scale, v_scale, query, output, block_table=None,
            seq_lens=None, kv_indptr=None, kv_indices=None, kv_last_page_len=None, k_block_scales=None,
            v_block_scales=None, kv_layout="NHD", k_sf_order=None, v_sf_order=None, q_dtype="f32",
            q_scale=0.0, p_dtype="bf16", out_dtype="bf16", split_tokens=0, partial_dtype="f32", mma_k=1,
            v_scale_after_output=False, sm_scale=0.0, prod_dtype="f32", l_unrounded=False, mma_frac=0, seq=None,
            diagnose=True, threads=0, worst=8, qo_indptr=None):
    """Certify a decode kernel's output (lowp/certify.h). The cache tensors are the
    framework's own (layout: vllm-fp8, flashinfer, sglang-nvfp4, trtllm); query is [batch,
    num_q_heads, qk_dim] before the kernel's cast, output [batch, num_q_heads, vo_dim].
    k_scale / v_scale are the decode-side scales (required: 1.0 for an unscaled cache).
    Extend / prefill: qo_indptr (int32 [batch + 1]) makes query and output [qo_indptr[-1],
    num_q_heads, ...]; sequence b's queries are its last qo_indptr[b+1] - qo_indptr[b] tokens,
    causal (query i sees positions 0 .. prefix + i). The declared arithmetic (q_dtype ..
    mma_frac) is lowp_certify_arith's, field by field.
    Raises ValueError on bad input; returns a Certificate."""
    if layout not in LAYOUTS:
        raise ValueError("lowp.certify: layout %r is not one of %s" % (layout, ", ".join(LAYOUTS)))
    c = _lib.lowp_certify_cache_init(LAYOUTS.index(layout), 0, 0, 0, 0, 0)
    if layout == "flashinfer":
        order = _KV_ORDER.get(str(kv_layout).lower())
        if order is None:
            raise ValueError("lowp.certify: kv_layout %r is not NHD or HND" % (kv_layout,))
        c.code_order = c.sf_order = order
    keep = []  # every array whose memory the C call reads
    k, ks, ke = _bytes(key_cache, "key_cache")
    v, vs, _ = _bytes(value_cache, "value_cache")
    keep += [k, v]
    shp = [(len(ks), (_sz * 4)(*ks)), (len(vs), (_sz * 4)(*vs)), (0, None), (0, None)]
    if k_block_scales is not None or v_block_scales is not None:
        ksf, kss, _ = _bytes(k_block_scales, "k_block_scales")
        vsf, vss, _ = _bytes(v_block_scales, "v_block_scales")
        keep += [ksf, vsf]
        shp[2:] = [(len(kss), (_sz * 4)(*kss)), (len(vss), (_sz * 4)(*vss))]
        c.k_sf, c.v_sf = ksf.ctypes.data, vsf.ctypes.data
    why = ctypes.create_string_buffer(512)
    if _lib.lowp_certify_cache_shapes(ctypes.byref(c), shp[0][0], shp[0][1], shp[1][0], shp[1][1], shp[2][0],
                                      shp[2][1], shp[3][0], shp[3][1], ke, why, 512):
        raise ValueError("lowp.certify: " + why.value.decode())
    for name, val, field in (("k_sf_order", k_sf_order, "k_sf_order"), ("v_sf_order", v_sf_order, "v_sf_order")):
        if val is not None:
            if val not in _SF_ORDER:
                raise ValueError("lowp.certify: %s %r is not linear or interleave4" % (name, val))
            setattr(c, field, _SF_ORDER[val])
    c.k, c.v = k.ctypes.data, v.ctypes.data
    c.k_scale, c.v_scale = float(k_scale), float(v_scale)
    if block_table is not None:
        bt, sl = _i32(block_table, "block_table"), _i32(seq_lens, "seq_lens")
        if bt.ndim != 2 or sl.shape != (bt.shape[0],):
            raise ValueError("lowp.certify: block_table must be [batch, max_blocks] and seq_lens [batch]")
        keep += [bt, sl]
        c.block_table, c.seq_lens, c.max_blocks, c.batch = bt.ctypes.data, sl.ctypes.data, bt.shape[1], bt.shape[0]
    else:
        ip, ix, lp = (_i32(kv_indptr, "kv_indptr"), _i32(kv_indices, "kv_indices"),
                      _i32(kv_last_page_len, "kv_last_page_len"))
        if ip.ndim != 1 or lp.shape != (ip.shape[0] - 1,) or ip[-1] > ix.size:
            raise ValueError("lowp.certify: kv_indptr [batch + 1], kv_last_page_len [batch], kv_indices "
                             "[kv_indptr[-1]] expected")
        keep += [ip, ix, lp]
        c.indptr, c.indices, c.last_page_len, c.batch = ip.ctypes.data, ix.ctypes.data, lp.ctypes.data, lp.shape[0]
    rows, qo = c.batch, None
    if qo_indptr is not None:
        qo = _i32(qo_indptr, "qo_indptr")
        if qo.shape != (c.batch + 1,) or qo[-1] <= 0:
            raise ValueError("lowp.certify: qo_indptr must be [batch + 1] = [%d] ending at the number of queries "
                             "(shape %s)" % (c.batch + 1, qo.shape))
        keep.append(qo)
        rows = int(qo[-1])
    q, o = _floats(query, "query"), _floats(output, "output")
    if q.ndim != 3 or q.shape[0] != rows or q.shape[2] != c.qk_dim:
        raise ValueError("lowp.certify: query shape %s, expected [%d, num_q_heads, %d]" %
                         (q.shape, rows, c.qk_dim))
    if o.shape != (rows, q.shape[1], c.vo_dim):
        raise ValueError("lowp.certify: output shape %s, expected %s" % (o.shape, (rows, q.shape[1], c.vo_dim)))
    a = _lib.lowp_certify_arith_default()
    a.q_dtype, a.p_dtype = _dtype(q_dtype, "q_dtype"), _dtype(p_dtype, "p_dtype")
    a.out_dtype, a.partial_dtype = _dtype(out_dtype, "out_dtype"), _dtype(partial_dtype, "partial_dtype")
    a.q_scale, a.split_tokens, a.mma_k = float(q_scale), int(split_tokens), int(mma_k)
    a.v_scale_after_output, a.sm_scale = int(bool(v_scale_after_output)), float(sm_scale)
    a.prod_dtype, a.l_unrounded, a.mma_frac = _dtype(prod_dtype, "prod_dtype"), int(bool(l_unrounded)), int(mma_frac)
    exact = np.full(o.shape, np.nan)
    bound = np.full(o.shape, np.nan)
    verdict = np.full(o.shape, 255, dtype=np.uint8)
    args = _Args(cache=c, arith=a, num_q_heads=q.shape[1], q=q.ctypes.data, out=o.ctypes.data,
                 only_seq=-1 if seq is None else int(seq), diagnose=int(bool(diagnose)), threads=int(threads),
                 n_worst=int(worst), exact=exact.ctypes.data, bound=bound.ctypes.data,
                 verdict=verdict.ctypes.data, qo_indptr=None if qo is None else qo.ctypes.data)
    res = _Result()
    if _lib.lowp_certify_run(ctypes.byref(args), ctypes.byref(res), why, 512):
        raise ValueError("lowp.certify: " + why.value.decode())
    del keep
    return Certificate(res, exact, bound, verdict)


def quantize(x, fmt="fp8_e4m3", scale=1.0, recipe=None, flags=0):
    """The cache model's quantize-on-write (lowp_block_quantize): x (float32, blocks along
    the last axis) -> (codes uint8, block scales uint8 or None) exactly as lowp's paged
    cache stores them, with the decode-side global scale `scale` (fp8: code = sat_rne(x /
    scale); nvfp4: E2M1 pairs, low nibble first, and E4M3 scales per 16). recipe: a name
    of RECIPES (ref/recipes.md) or None for the format's default; flags: LOWP_BLOCK_* bits
    (NAN_CANONICAL, CUDA_SCALAR_DIV, CUDA_OPS)."""
    if fmt not in _BLOCK_FORMATS:
        raise ValueError("lowp.quantize: format %r is not one of %s" % (fmt, ", ".join(_BLOCK_FORMATS)))
    f = _BLOCK_FORMATS[fmt]
    if isinstance(recipe, str):
        if recipe not in RECIPES:
            raise ValueError("lowp.quantize: recipe %r is not one of %s" % (recipe, ", ".join(RECIPES)))
        recipe = RECIPES.index(recipe)
    r = _lib.lowp_recipe_default(f) if recipe is None else recipe
    a = np.ascontiguousarray(_numpy(x), dtype=np.float32)
    n = a.size
    block = {0: 16, 1: 32, 2: 32}.get(f, 1)
    per = {0: 2, 1: 2}.get(f, 1)  # elements per code byte
    if n % block or a.shape[-1] % block:
        raise ValueError("lowp.quantize: the last axis (%d) is not a multiple of the block (%d)" % (a.shape[-1], block))
    codes = np.empty(a.shape[:-1] + (a.shape[-1] // per,), dtype=np.uint8 if f != 5 else np.uint16)
    scales = np.empty(a.shape[:-1] + (a.shape[-1] // block,), dtype=np.uint8) if block > 1 else None
    why = ctypes.create_string_buffer(512)
    gs = _lib.lowp_global_scale_from_dec(f, r, float(scale))
    if _lib.lowp_block_quantize(f, r, gs, int(flags), a.ctypes.data, n, codes.ctypes.data,
                                None if scales is None else scales.ctypes.data, None, why, 512):
        raise ValueError("lowp.quantize: " + why.value.decode())
    return codes, scales
