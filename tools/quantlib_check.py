#!/usr/bin/env python3
"""tools/quantlib_check.py: third-party NVFP4 / MX quantizers against lowp's recipes, byte for byte.

    python3 tools/quantlib_check.py --out quantlib-check.md [--quick] [--device cpu|cuda]
    python3 tools/quantlib_check.py --probe [--device cuda]   (the device probe only, to stdout)

For each (library, format, mode) it quantizes one fixed, seeded adversarial set of blocks
with the library (torch tensors on --device) and with lowp (`import lowp`, liblowp.so through
ctypes) under the recipe named for it, and compares element codes, block scale codes and the
global scale bits. Every differing block is printed (input block as hex floats, both
outputs) and classified (scale code / element codes; the kind of block it came from); the
Markdown report has one row per (library, version, format, mode, device): blocks compared,
blocks differing, verdict, and the source line that explains a difference.

The set (make_blocks): E2M1 / E4M3 rounding midpoints in blocks whose amax walks the whole
binary32 exponent range; block amax one ulp either side of every power of two and of
max_elem * 2^k (the scale rounding boundaries of FLOOR / CEIL / RCEIL / E4M3 scales); E4M3
scale midpoints for NVFP4 at the global scale in use; zero and -0 blocks; subnormal blocks;
NaN (both signs) and +-Inf elements; FLT_MAX and the overflow bands; random normals across
scales and heavy tails (Cauchy). --quick keeps every kind, with fewer exponents and draws.

The report also carries the device probe (probe()): the values of the torch / Triton
operations that lowp/block.h's LOWP_BLOCK_CUDA_OPS models from source reading
(ref/recipes.md T6-T8), measured on --device, each against what lowp assumes.

Libraries missing are reported as not installed. Exit status: 0 every comparison made
agrees, 1 a lowp recipe differs from the library it is named after, 2 bad usage or lowp not
loadable, 77 torch or one of the three libraries is not installed (what ran is still written).
"""
import argparse
import datetime
import importlib
import os
import pathlib
import platform
import sys
import time
import warnings

import numpy as np

PROG = "quantlib_check"
ROOT = pathlib.Path(__file__).resolve().parent.parent
E2M1_MID = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
FIRST_MAX = 6  # differing blocks printed per comparison


def log(msg):
    print(f"{PROG}: {msg}", flush=True)


def f32(bits):
    return np.array(bits, dtype=np.uint32).view(np.float32)


def e4m3_midpoints():
    """Midpoints between adjacent positive E4M3 values, and 464 (the overflow tie)."""
    import ml_dtypes
    v = np.arange(0, 0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    return np.concatenate([(v[:-1] + v[1:]) / 2, [464.0]])


def make_blocks(bs, elem_max, rng, quick, g=1.0):
    """[n, bs] float32 adversarial blocks and a kind label per block."""
    blocks, kinds = [], []

    def add(kind, b):
        b = np.asarray(b, dtype=np.float64)
        with np.errstate(over="ignore"):
            blocks.append(np.resize(b, bs).astype(np.float32))
        kinds.append(kind)

    step = 7 if quick else 1
    mids = np.array(E2M1_MID + [0.5, 1, 1.5, 2, 3, 4, 6], dtype=np.float64)
    if elem_max == 448.0:
        mids = np.concatenate([mids, e4m3_midpoints()[::4 if quick else 1] / 448.0 * 6.0])
    for k in range(-149, 128, step):
        # elements on E2M1 midpoints (both signs) in a block whose amax is 6 * 2^k
        s = np.ldexp(1.0, k)
        e = np.concatenate([[6.0], mids, -mids]) * s
        add("midpoints", rng.permutation(e)[:bs] if len(e) >= bs else e)
        for p in (np.ldexp(1.0, k), elem_max * np.ldexp(1.0, k)):
            for u in (-1, 0, 1):  # one ulp below, on, above the boundary
                a = np.float32(p)
                if not np.isfinite(a) or a == 0:
                    continue
                a = np.nextafter(a, np.float32(np.inf if u > 0 else 0)) if u else a
                add("amax-boundary", np.concatenate([[a], rng.standard_normal(bs - 1) * a / 4]))
    # NVFP4: block scales s = amax / (6 g) on the E4M3 midpoints, and one ulp either side
    if bs == 16:
        for m in e4m3_midpoints()[::3 if quick else 1]:
            a = np.float32(m * 6.0 * g)
            for a2 in (np.nextafter(a, np.float32(0)), a, np.nextafter(a, np.float32(np.inf))):
                add("e4m3-scale-mid", np.concatenate([[a2], rng.standard_normal(bs - 1) * a2 / 3]))
    add("zero", np.zeros(bs))
    add("neg-zero", -np.zeros(bs))
    add("zero-mixed", np.where(np.arange(bs) % 2, -0.0, 0.0))
    for k in (-149, -140, -130, -127, -126, -125, -120):
        add("subnormal", rng.standard_normal(bs) * np.ldexp(1.0, k))
    nan_p, nan_n = f32(0x7FC00000), f32(0xFFC00000)
    nan_pay = f32(0x7FE00001)
    for lab, special in (("nan", nan_p), ("nan-neg", nan_n), ("nan-payload", nan_pay),
                         ("inf", np.float32(np.inf)), ("-inf", np.float32(-np.inf))):
        b = rng.standard_normal(bs).astype(np.float32)
        b[3] = special
        add(lab, b)
    all_nan = np.full(bs, nan_p, dtype=np.float32)
    add("nan-all", all_nan)
    fmax = np.float32(np.finfo(np.float32).max)
    add("flt-max", np.concatenate([[fmax, -fmax], rng.standard_normal(bs - 2) * 1e37]))
    for band in np.linspace(0.9, 1.1, 9 if quick else 41):  # overflow bands of elem_max * 448 * g
        a = np.float32(band * elem_max * 448.0 * g)
        add("overflow-band", np.concatenate([[a], rng.standard_normal(bs - 1) * a / 2]))
    n_rand = 200 if quick else 4000
    for i in range(n_rand):
        add("normal", rng.standard_normal(bs) * 10.0 ** rng.uniform(-30, 30))
    for i in range(n_rand // 2):
        add("heavy-tail", rng.standard_cauchy(bs) * 10.0 ** rng.uniform(-10, 10))
    x = np.stack(blocks).astype(np.float32)
    return x, kinds


# ---------------------------------------------------------------- the libraries

def u8(t):
    import torch
    t = t.detach()
    if t.dtype != torch.uint8:
        t = t.view(torch.uint8)
    return t.cpu().numpy()


def lib_modelopt():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import modelopt
        from modelopt.torch.quantization.qtensor import MXFP4QTensor, MXFP8QTensor, NVFP4QTensor

    def nvfp4(x, g):
        import torch
        qt, s, g2 = NVFP4QTensor.quantize(x, 16, weights_scaling_factor_2=torch.tensor(g, device=x.device),
                                          try_tensorrt=False)
        return u8(qt._quantized_data), u8(s), np.float32(g2.item())

    def mxfp4(x, g):
        qt, s = MXFP4QTensor.quantize(x, 32)
        return u8(qt._quantized_data), u8(s).reshape(-1), None

    def mxfp8(x, g):
        qt, s = MXFP8QTensor.quantize(x)
        return u8(qt._quantized_data), u8(s).reshape(-1), None

    return "nvidia-modelopt", modelopt.__version__, [
        ("nvfp4", "-", "modelopt", nvfp4,
         "modelopt/torch/quantization/qtensor/nvfp4_tensor.py: NVFP4QTensor.quantize"),
        ("mxfp4", "-", "modelopt", mxfp4, "qtensor/mxfp4_tensor.py: MXFP4QTensor.quantize"),
        ("mxfp8", "-", "modelopt", mxfp8, "qtensor/mxfp8_tensor.py: MXFP8QTensor.quantize"),
    ]


def lib_torchao():
    import torch
    import torchao
    from torchao.prototype.mx_formats.config import ScaleCalculationMode as M
    from torchao.prototype.mx_formats.mx_tensor import to_mx
    from torchao.prototype.mx_formats.nvfp4_tensor import nvfp4_quantize

    def nvfp4(x, g):
        s, d = nvfp4_quantize(x, 16, per_tensor_scale=torch.tensor(g, device=x.device))
        return u8(d), u8(s).reshape(-1), np.float32(g)

    def mx(elem, mode):
        def run(x, g):
            s, d = to_mx(x, elem, 32, mode)
            return u8(d), u8(s).reshape(-1), None
        return run

    rows = [("nvfp4", "per-tensor", "torchao", nvfp4, "prototype/mx_formats/nvfp4_tensor.py: nvfp4_quantize")]
    # lowp's older recipes that name torchao's modes in their history: compared for the record
    ALSO[("torchao", "FLOOR")] = ["ocp"]
    ALSO[("torchao", "RCEIL")] = ["rceil"]
    for fmt, elem in (("mxfp4", torch.float4_e2m1fn_x2), ("mxfp8", torch.float8_e4m3fn)):
        for mode in (M.FLOOR, M.CEIL, M.EVEN, M.RCEIL):
            rows.append((fmt, mode.name, "torchao-" + mode.value, mx(elem, mode),
                         "prototype/mx_formats/mx_tensor.py: to_mx(%s)" % mode.name))
    return "torchao", torchao.__version__, rows


def lib_compressed_tensors():
    """The path llm-compressor drives: block min / max (the observer; here torch.aminmax),
    generate_gparam (NVFP4), calculate_qparams, quantize, then the compressor's packing
    (pack_fp4_to_uint8) and E8M0 scale encoding (compress_mx_scale)."""
    import torch
    import compressed_tensors
    from compressed_tensors.compressors.mx_utils import compress_mx_scale
    from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8
    from compressed_tensors.quantization import preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.utils.helpers import calculate_qparams, generate_gparam

    def run(preset, bs):
        args = preset_name_to_scheme(preset, ["Linear"]).weights

        def go(x, g):
            xb = x.reshape(-1, bs)
            mn, mx = torch.aminmax(xb, dim=-1)
            gs = None
            if preset == "NVFP4":
                gs = torch.tensor([np.float32(1.0) / np.float32(g)], device=x.device)  # encode side
            scale, zp = calculate_qparams(mn.reshape(-1, 1), mx.reshape(-1, 1), args, global_scale=gs)
            q = quantize(x=xb, scale=scale, zero_point=None, args=args, global_scale=gs)
            if preset == "MXFP8":
                codes = u8(q.to(torch.float8_e4m3fn))
            else:
                codes = u8(pack_fp4_to_uint8(q.reshape(x.shape[0], -1)))
            if preset == "NVFP4":
                sc = u8(scale.to(torch.float8_e4m3fn)).reshape(-1)
            else:
                sc = u8(compress_mx_scale(scale, torch.uint8)).reshape(-1)
            return codes, sc, None
        return go

    src = ("quantization/utils/helpers.py: calculate_qparams; lifecycle/forward_helpers.py: _quantize; "
           "compressors/nvfp4/helpers.py: pack_fp4_to_uint8")
    return "compressed-tensors", compressed_tensors.__version__, [
        ("nvfp4", "NVFP4", "compressed-tensors", run("NVFP4", 16), src),
        ("mxfp4", "MXFP4", "compressed-tensors", run("MXFP4", 32), src + "; mxfp_utils.py: generate_mx_scales"),
        ("mxfp8", "MXFP8", "compressed-tensors", run("MXFP8", 32), src + "; mxfp_utils.py: generate_mx_scales"),
    ]


# (library, mode) -> lowp recipes not named after it, compared for the record: a difference
# there is expected and explained (EXPLAIN), never a failure
ALSO = {}
EXPLAIN = {
    "ocp": "ocp divides a scale-code-0 block by 2^-127 (torchao: F32_MIN_NORMAL clamp, mx_tensor.py "
           "`scale_fp32 = torch.clamp(scale_fp32, min=F32_MIN_NORMAL)`), gives a NaN / Inf amax the code 0xFF and "
           "NaN elements (torchao: Inf is an ordinary exponent, 0xFF divides by +Inf), and casts with cuda satfinite",
    "rceil": "rceil rounds amax * RN(1/max) up exactly; torchao RCEIL takes ceil(torch.log2(amax / max)) "
             "(mx_tensor.py _to_mx_rceil), whose binary32 log2 rounds d = 2^k (1 + 2^-23) down to k for |k| >= 4, "
             "and multiplies by 1 for scale code 0",
}
LIBS = [("modelopt", lib_modelopt), ("torchao", lib_torchao), ("compressed_tensors", lib_compressed_tensors)]
FMT = {"nvfp4": (16, 6.0), "mxfp4": (32, 6.0), "mxfp8": (32, 448.0)}


# What LOWP_BLOCK_CUDA_OPS assumes (ref/block/src/block.c CUDA_EXP2_M127_BITS, recipes.md T8):
# torch.exp2(-127.0) on a CUDA float32 tensor, as bits
MODEL_EXP2_M127_CUDA = 0x003FFFFF


def probe(device, lowp, flags):
    """Lines measuring the CUDA op semantics behind LOWP_BLOCK_CUDA_OPS (recipes.md T6-T8) on
    device, each with what lowp assumes there (lowp's own bytes under flags for the
    compressed-tensors blocks; the CPU's x86 values are printed for comparison)."""
    import torch
    out = []
    bits = lambda t: " ".join("%08x" % (int(v) & 0xFFFFFFFF) for v in t.view(torch.int32).cpu().tolist())
    ex = torch.tensor([-127.0, -126.0, -128.0, -149.0, -150.0, -63.5, 0.0], device=device)
    e2 = torch.exp2(ex)
    out.append("T8 torch.exp2([-127, -126, -128, -149, -150, -63.5, 0]) bits: %s" % bits(e2))
    got = int(e2[0:1].view(torch.int32).item()) & 0xFFFFFFFF
    want = MODEL_EXP2_M127_CUDA if device == "cuda" else 0x00400000
    out.append("T8 exp2(-127) = %08x; lowp assumes %08x on %s: %s" % (got, want, device,
               "agrees" if got == want else "DISAGREES (set CUDA_EXP2_M127_BITS in ref/block/src/block.c)"))
    ints = torch.arange(-150, 128, dtype=torch.float32, device=device)
    exact = torch.from_numpy(np.ldexp(np.float32(1.0), np.arange(-150, 128)).astype(np.float32)).to(device)
    off = [int(k) for k in ints[torch.exp2(ints) != exact].cpu().tolist()]
    out.append("T8 torch.exp2(k) != 2^k for the integers k in [-150, 127]: %s" % (off or "none"))
    p2 = 2.00 ** ints  # compressed-tensors maybe_convert_from_mx_exp
    off2 = [int(k) for k in ints[p2 != exact].cpu().tolist()]
    out.append("T8 2.0 ** k (compressed-tensors) != 2^k for k in [-150, 127]: %s" % (off2 or "none"))
    q = torch.tensor([2.0 ** -129, 1.25 * 2.0 ** -127], device=device)
    out.append("T8 x / torch.exp2(-127) for x = 2^-129, 1.25 * 2^-127 (exact: 3e800000 3fa00000): %s"
               % bits(q / torch.exp2(torch.full_like(q, -127.0))))
    sp = torch.tensor([float("inf"), float("-inf"), float("nan"), 3e9, -1.0], device=device)
    out.append("T6 [inf, -inf, nan, 3e9, -1].to(int32): %s (lowp: cuda 7fffffff 80000000 00000000 "
               "7fffffff ffffffff; x86 80000000 for the first four)" % bits(sp.to(torch.int32)))
    out.append("T6 (127 + floor(log2(inf)).to(int32)).to(uint8) (compress_mx_scale): %02x (lowp: cuda 7e, x86 7f)"
               % int((127 + torch.floor(torch.log2(sp[0:1])).to(torch.int32)).to(torch.uint8).item()))
    out.append("T6 ([inf, nan] + 127).to(uint8) (ModelOpt MXFP4 e8m0): %s (lowp: cuda ff 00, x86 00 00)"
               % " ".join("%02x" % v for v in (sp[[0, 2]] + 127).to(torch.uint8).cpu().tolist()))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, _, cases = lib_compressed_tensors()
        # a NaN block (scale code 0, the NaN element clamped) and an Inf block (scale Inf)
        x = np.zeros((2, 32), dtype=np.float32)
        x[0] = np.random.default_rng(1).standard_normal(32)  # as make_blocks' "nan" blocks
        x[0, 3] = f32(0x7FC00000)
        x[1, :5] = f32([0x7F800000, 0xFF800000, 0x3F800000, 0xBF800000, 0x80000000])
        # as many rows as the comparison has: torch.aminmax's CPU NaN sign depends on the
        # reduction kernel, which depends on the shape (2 rows alone give +NaN, not -NaN)
        x = np.tile(x, (4000, 1))
        for fmt, _, recipe, fn, _ in cases[1:]:
            c, sc, _ = fn(torch.from_numpy(x).to(device), 1.0)
            oc, osc = lowp.quantize(x, fmt, recipe=recipe, flags=flags)
            for b, what in enumerate(("[normals, nan at 3]", "[inf, -inf, 1, -1, -0, 0...]")):
                got = "scale %02x codes %s" % (int(np.asarray(sc).reshape(-1)[b]),
                                               " ".join("%x" % v for v in unpack(c, fmt, 32)[b][:6]))
                want = "scale %02x codes %s" % (int(osc.reshape(-1)[b]),
                                                " ".join("%x" % v for v in unpack(oc, fmt, 32)[b][:6]))
                out.append("T6/T7 compressed-tensors %s %s: %s; lowp %s" %
                           (fmt, what, got, "agrees" if got == want else "DISAGREES: " + want))
    except ImportError as err:
        out.append("T7 compressed-tensors not installed (%s)" % err)
    except Exception as err:  # a probe that fails says so and the comparison still runs
        out.append("T7 compressed-tensors probe failed: %s: %s" % (type(err).__name__, str(err).splitlines()[0][:160]))
    return out


def hexblock(b):
    return " ".join(float(v).hex() if np.isfinite(v) else "%s(%08x)" % (v, int(np.float32(v).view(np.uint32)))
                    for v in b)


def unpack(codes, fmt, bs):
    """[n, bs] element codes from the library's or lowp's packed bytes."""
    c = np.asarray(codes, dtype=np.uint8).reshape(-1)
    if fmt == "mxfp8":
        return c.reshape(-1, bs)
    e = np.empty(c.size * 2, dtype=np.uint8)
    e[0::2], e[1::2] = c & 0xF, c >> 4
    return e.reshape(-1, bs)


def compare(lowp, libname, ver, fmt, mode, recipe, fn, src, x, kinds, g, device, flags, out_lines):
    import torch
    bs = FMT[fmt][0]
    xt = torch.from_numpy(x.copy()).to(device)
    t0 = time.time()
    try:
        lc, ls, lg = fn(xt, g)
    except Exception as e:  # a library refusing an input is reported, not hidden
        return {"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:160])}
    codes, scales = lowp.quantize(x, fmt, scale=g, recipe=recipe, flags=flags)
    le, oe = unpack(lc, fmt, bs), unpack(codes, fmt, bs)
    ls = np.asarray(ls, dtype=np.uint8).reshape(-1)
    os_ = scales.reshape(-1)
    if le.shape != oe.shape or ls.shape != os_.shape:
        return {"error": "shape: library codes %s scales %s, lowp %s %s" % (le.shape, ls.shape, oe.shape, os_.shape)}
    d_scale = ls != os_
    d_elem = (le != oe).any(axis=1)
    bad = np.nonzero(d_scale | d_elem)[0]
    g_ok = lg is None or np.float32(lg).view(np.uint32) == np.float32(g).view(np.uint32)
    by_kind = {}
    for i in bad:
        key = ("scale" if d_scale[i] else "elements") + " @ " + kinds[i]
        by_kind[key] = by_kind.get(key, 0) + 1
    for i in bad[:FIRST_MAX]:
        out_lines.append("%s %s %s %s %s block %d (%s): input [%s]\n    library scale %02x codes %s\n"
                         "    lowp    scale %02x codes %s" %
                         (libname, ver, fmt, mode, device, i, kinds[i], hexblock(x[i]), ls[i],
                          " ".join("%x" % v for v in le[i]), os_[i], " ".join("%x" % v for v in oe[i])))
    return {"blocks": len(x), "differ": len(bad), "classes": by_kind, "g_ok": bool(g_ok),
            "s": time.time() - t0}


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="quantlib-check.md")
    ap.add_argument("--quick", action="store_true", help="fewer exponents and draws (CI)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (torch tensors on it)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("LOWP_SEED", "20")))
    ap.add_argument("--probe", action="store_true", help="print the device probe (recipes.md T6-T8) and exit")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT / "python"))
    try:
        import lowp
    except ImportError as e:
        print("%s: lowp not loadable: %s" % (PROG, e), file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        log("torch is not installed: skipped")
        return 77
    if a.device not in ("cpu", "cuda") or (a.device == "cuda" and not torch.cuda.is_available()):
        print("%s: --device %s is not available" % (PROG, a.device), file=sys.stderr)
        return 2
    # torch on CUDA tensors: canonical NaNs, a division by a Python number done as a multiply
    # by its binary32 reciprocal (lowp/block.h LOWP_BLOCK_CUDA_SCALAR_DIV), and the CUDA
    # casts, Triton clamp and exp2(-127) of compressed-tensors / ModelOpt MX (LOWP_BLOCK_CUDA_OPS)
    flags = lowp.NAN_CANONICAL | lowp.CUDA_SCALAR_DIV | lowp.CUDA_OPS if a.device == "cuda" else 0
    probe_lines = probe(a.device, lowp, flags)
    for line in probe_lines:
        log("probe: " + line)
    if a.probe:
        return 0
    rng = np.random.default_rng(a.seed)
    sets = {}
    for fmt, (bs, emax) in FMT.items():
        if fmt == "nvfp4":
            x, kinds = make_blocks(bs, emax, rng, a.quick, g=1.0)
            fin = np.abs(x[np.isfinite(x)])
            g_amax = np.float32(np.float32(fin.max()) / np.float32(2688.0))
            # two global scales: the tensor's finite amax / 2688 and the uncalibrated 1.0
            # global scales: the uncalibrated 1.0, the tensor's finite amax / 2688 (here
            # FLT_MAX / 2688), and two that put the typical blocks' scales into the E4M3
            # subnormals (2^-4) and past 448 (2^-14: the clamp)
            x2, kinds2 = make_blocks(bs, emax, rng, a.quick, g=np.float32(2.0 ** -4))
            sets[fmt] = [(x, kinds, np.float32(1.0)), (x, kinds, g_amax), (x2, kinds2, np.float32(2.0 ** -4)),
                         (x, kinds, np.float32(2.0 ** -14))]
        else:
            x, kinds = make_blocks(bs, emax, rng, a.quick)
            sets[fmt] = [(x, kinds, np.float32(1.0))]
    rows, details, alt_details, missing = [], [], [], []
    for mod, loader in LIBS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                name, ver, cases = loader()
        except ImportError as e:
            missing.append(mod)
            rows.append((mod, "-", "-", "-", a.device, "-", 0, 0, "not installed (%s)" % e, ""))
            continue
        for fmt, mode, recipe, fn, src in cases:
            for x, kinds, g in sets[fmt]:
                label = mode if fmt != "nvfp4" else "%s g=%s" % (mode, float(g).hex())
                r = compare(lowp, name, ver, fmt, label, recipe, fn, src, x, kinds, float(g), a.device,
                            flags, details)
                if "error" in r:
                    rows.append((name, ver, fmt, label, a.device, recipe, 0, 0, "ERROR " + r["error"], src))
                    continue
                ok = r["differ"] == 0 and r["g_ok"]
                verdict = "equal" if ok else "DIFFERS"
                why = "; ".join("%s: %d" % kv for kv in sorted(r["classes"].items()))
                if not r["g_ok"]:
                    why += " global scale bits differ"
                rows.append((name, ver, fmt, label, a.device, recipe, r["blocks"], r["differ"], verdict,
                             src + ((" | " + why) if why else "")))
                for alt in ALSO.get((mod, mode), []):
                    ra = compare(lowp, name, ver, fmt, label + " vs " + alt, alt, fn, src, x, kinds, float(g),
                                 a.device, flags, alt_details)
                    if "error" in ra:
                        continue
                    va = "equal" if ra["differ"] == 0 else "differs (not named after it)"
                    wa = "; ".join("%s: %d" % kv for kv in sorted(ra["classes"].items()))
                    rows.append((name, ver, fmt, label, a.device, alt, ra["blocks"], ra["differ"], va,
                                 EXPLAIN.get(alt, "") + ((" | " + wa) if wa else "")))
                    log("%-18s %-8s %-6s %-24s %-14s %6d blocks %5d differ  %s" %
                        (name, ver, fmt, label, alt, ra["blocks"], ra["differ"], va))
                log("%-18s %-8s %-6s %-24s %-14s %6d blocks %5d differ  %s" %
                    (name, ver, fmt, label, recipe, r["blocks"], r["differ"], verdict))
    for line in details:
        print(line)
    write_report(a, rows, details, alt_details, torch, probe_lines)
    if any(r[8] == "DIFFERS" or r[8].startswith("ERROR") for r in rows):
        return 1
    return 77 if missing else 0


def write_report(a, rows, details, alt_details, torch, probe_lines):
    with open(a.out, "w") as f:
        f.write("# Third-party quantizers vs lowp recipes (tools/quantlib_check.py)\n\n")
        f.write("- date: %s; machine: %s %s; torch %s; device %s%s; seed %d%s\n\n" %
                (datetime.date.today().isoformat(), platform.system(), platform.machine(), torch.__version__,
                 a.device, (" (%s)" % torch.cuda.get_device_name(0)) if a.device == "cuda" else "", a.seed,
                 "; --quick" if a.quick else ""))
        f.write("| library | version | format | mode | device | lowp recipe | blocks | differing | verdict | "
                "source; differences by class |\n|---|---|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| " + " | ".join(str(c) for c in r) + " |\n")
        f.write("\n## Device probe (ref/recipes.md T6-T8, LOWP_BLOCK_CUDA_OPS)\n\n```\n" +
                "\n".join(probe_lines) + "\n```\n")
        if details:
            f.write("\n## First differing blocks\n\n```\n" + "\n".join(details) + "\n```\n")
        if alt_details:
            f.write("\n## First differing blocks against recipes not named after the library (expected)\n\n"
                    "```\n" + "\n".join(alt_details) + "\n```\n")


if __name__ == "__main__":
    sys.exit(main())
