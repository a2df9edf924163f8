#!/usr/bin/env python3
"""tests/interop_tensors.py --lowp LOWP: lowp's tensor files against numpy and safetensors.

Tensors are written with numpy / safetensors, run through `lowp quantize` and
`lowp dequantize`, and the results are read back with numpy (np.load) and the safetensors
package (safe_open, load_file, deserialize). Checked:
  - the files load; tensor names, dtypes, shapes and metadata are as documented in
    tools/cmd_quantize.c (layout "lowp-blocked-v1");
  - the global scale is the one ref/recipes.md defines, recomputed here in numpy float32;
  - the codes unpack as documented (4-bit: element 2i in the low nibble) and
    dequantize(quantize(x)) equals code_value * scale_value * global_scale recomputed from
    the stored bytes with ml_dtypes (float4_e2m1fn, float8_e4m3fn, float8_e5m2,
    float8_e8m0fnu, bfloat16), bit for bit, after unpadding and moving the axis back;
  - for two recipes simple enough to restate (MXFP8 ocp, FP8 E4M3 exact) the codes equal an
    independent numpy/ml_dtypes quantization;
  - lowp's .npy is byte-identical to np.save, and lowp's .safetensors has the safetensors
    crate's layout (same entries, order, offsets, padding and data as safetensors.numpy.save);
  - bad input: exit 2, one line on stderr starting "lowp: ", no output file, no temporary.
Exit 77 (skip) when numpy, ml_dtypes or safetensors is missing.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import ml_dtypes
    import numpy as np
    import safetensors
    import safetensors.numpy as stnp
    from safetensors import safe_open
except ImportError as e:  # pragma: no cover
    print(f"interop_tensors: skipped ({e})")
    sys.exit(77)

# safetensors' numpy backend looks the float8 / bfloat16 dtypes up on the numpy module
# (np.float8_e4m3fn, ...); ml_dtypes provides them. Without this, safe_open(..., "np")
# refuses F8_E4M3 / F8_E8M0 / BF16 tensors although the file is valid.
for _name in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"):
    if not hasattr(np, _name):
        setattr(np, _name, getattr(ml_dtypes, _name))

FORMATS = {
    # name: (block size, element dtype for values, codes dtype in the file, scale dtype, global scale)
    "nvfp4": (16, ml_dtypes.float4_e2m1fn, "U8", "F8_E4M3", True),
    "mxfp4": (32, ml_dtypes.float4_e2m1fn, "U8", "F8_E8M0", False),
    "mxfp8": (32, ml_dtypes.float8_e4m3fn, "F8_E4M3", "F8_E8M0", False),
    "fp8_e4m3": (1, ml_dtypes.float8_e4m3fn, "F8_E4M3", None, True),
    "fp8_e5m2": (1, ml_dtypes.float8_e5m2, "F8_E5M2", None, True),
    "bf16": (1, ml_dtypes.bfloat16, "BF16", None, False),
}
RECIPES = {
    "nvfp4": ["trtllm", "exact", "modelopt", "sglang-kv"],
    "mxfp4": ["ocp", "rceil", "trtllm"],
    "mxfp8": ["ocp", "rceil", "trtllm"],
    "fp8_e4m3": ["exact"],
    "fp8_e5m2": ["exact"],
    "bf16": ["exact"],
}
SCALE_VIEW = {"F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E8M0": ml_dtypes.float8_e8m0fnu}
F32 = np.float32


class Checker:
    def __init__(self, lowp, tmp):
        self.lowp = lowp
        self.tmp = tmp
        self.passed = 0
        self.failed = 0

    def ok(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL: {what}")
        return cond

    def run(self, *args):
        return subprocess.run([self.lowp, *args], capture_output=True, text=True)

    def path(self, name):
        return os.path.join(self.tmp, name)


def recipe_global_scale(fmt, recipe, amax):
    """The decode-side global scale of ref/recipes.md, in numpy float32 arithmetic."""
    amax = F32(amax)
    with np.errstate(all="ignore"):
        if fmt == "nvfp4":
            if recipe == "trtllm":
                s = F32(2688) / amax
                return F32(1) / s
            if recipe == "exact":
                q = F32(2688) / amax
                s = F32(np.finfo(F32).max) if np.isnan(q) else min(q, F32(np.finfo(F32).max))
                if amax == 0 or s == 0:
                    s = F32(1)
                return F32(1.0 / np.float64(s))
            if recipe == "modelopt":
                return amax / F32(2688)
            return F32(1)  # sglang-kv
        maxv = F32(448) if fmt == "fp8_e4m3" else F32(57344)
        if amax > 0 and np.isfinite(amax):
            return amax / maxv
        return F32(1)


def bits_equal(a, b):
    """Same values bit for bit, except that any NaN matches any NaN."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    na, nb = np.isnan(a), np.isnan(b)
    if not np.array_equal(na, nb):
        return False
    ia = a.view(np.uint64 if a.dtype == np.float64 else np.uint32)
    ib = b.view(np.uint64 if b.dtype == np.float64 else np.uint32)
    return bool(np.all((ia == ib) | na))


def header_of(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    return n, data[8:8 + n], data[8 + n:]


def independent_dequant(fmt, tensors, shape, axis, lp):
    """code * scale * global_scale in float64 from the stored bytes, unpadded, axis restored."""
    bs, elem_dt, codes_dt, scale_dt, has_g = FORMATS[fmt]
    codes = tensors["codes"]
    if codes_dt == "U8":
        lo, hi = codes & 0x0F, codes >> 4
        nib = np.stack([lo, hi], axis=-1).reshape(codes.shape[:-1] + (lp,))  # element 2i = low nibble
        vals = nib.astype(np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)
    else:
        vals = codes.astype(np.float64)
    if scale_dt is not None:
        sc = tensors["scales"].astype(np.float64)
        vals = vals * np.repeat(sc, bs, axis=-1)
    if has_g:
        vals = vals * np.float64(tensors["global_scale"][0])
    vals = vals[..., : shape[axis]]
    return np.moveaxis(vals, -1, axis)


def check_quantized(c, label, x, fmt, recipe, axis, qpath, given_g=None, scale_up=False):
    """Everything about one quantized file and its dequantization."""
    bs, elem_dt, codes_dt, scale_dt, has_g = FORMATS[fmt]
    shape = x.shape
    ax = axis % x.ndim
    L = shape[ax]
    lp = -(-L // bs) * bs
    p_shape = tuple(d for i, d in enumerate(shape) if i != ax)

    # safetensors' own strict parser accepts the file
    with open(qpath, "rb") as f:
        raw = f.read()
    try:
        safetensors.deserialize(raw)
        c.ok(True, "")
    except Exception as e:  # noqa: BLE001
        c.ok(False, f"{label}: safetensors.deserialize refused the file: {e}")
        return

    with safe_open(qpath, "np") as f:
        meta = f.metadata()
        keys = sorted(f.keys())
        dtypes = {k: f.get_slice(k).get_dtype() for k in keys}
        tensors = {k: f.get_tensor(k) for k in keys}
    want_keys = sorted(["codes"] + (["scales"] if scale_dt else []) + (["global_scale"] if has_g else []))
    if not c.ok(keys == want_keys, f"{label}: tensors {keys}, expected {want_keys}"):
        return
    c.ok(dtypes["codes"] == codes_dt, f"{label}: codes dtype {dtypes['codes']}, expected {codes_dt}")
    code_len = lp // 2 if codes_dt == "U8" else lp
    c.ok(tensors["codes"].shape == p_shape + (code_len,),
         f"{label}: codes shape {tensors['codes'].shape}, expected {p_shape + (code_len,)}")
    if scale_dt:
        c.ok(dtypes["scales"] == scale_dt, f"{label}: scales dtype {dtypes['scales']}")
        c.ok(tensors["scales"].shape == p_shape + (lp // bs,), f"{label}: scales shape {tensors['scales'].shape}")
    if has_g:
        c.ok(dtypes["global_scale"] == "F32" and tensors["global_scale"].shape == (1,),
             f"{label}: global_scale {dtypes['global_scale']} {tensors['global_scale'].shape}")

    # metadata as documented
    want_meta = {
        "format": fmt, "recipe": recipe, "block_size": str(bs), "axis": str(ax),
        "shape": "[" + ", ".join(str(d) for d in shape) + "]", "padded_axis_size": str(lp),
        "layout": "lowp-blocked-v1", "scale_up": "1" if scale_up else "0",
        "global_scale_source": ("given" if given_g is not None else "amax") if has_g else "none",
    }
    for k, v in want_meta.items():
        c.ok(meta.get(k) == v, f"{label}: metadata {k} = {meta.get(k)!r}, expected {v!r}")
    for k in ("lowp_version", "layout_doc", "amax", "input_dtype"):
        c.ok(k in meta, f"{label}: metadata {k} missing")
    n_elems = int(np.prod(p_shape, dtype=np.int64)) * lp
    c.ok(meta.get("count_elements") == str(n_elems), f"{label}: count_elements {meta.get('count_elements')} != {n_elems}")
    c.ok(meta.get("count_padding") == str(n_elems - x.size), f"{label}: count_padding {meta.get('count_padding')}")
    xf = x.astype(np.float32)
    c.ok(meta.get("count_nan_in") == str(int(np.isnan(xf).sum())), f"{label}: count_nan_in {meta.get('count_nan_in')}")
    c.ok(meta.get("count_inf_in") == str(int(np.isinf(xf).sum())), f"{label}: count_inf_in {meta.get('count_inf_in')}")
    for k in ("count_saturated", "count_flushed", "count_nan_out", "count_scale_zero",
              "count_scale_subnormal", "count_scale_nan", "count_blocks"):
        c.ok(meta.get(k, "").isdigit(), f"{label}: metadata {k} = {meta.get(k)!r} is not a count")
    if scale_dt:
        hist = json.loads(meta.get("scale_histogram", "{}"))
        sc_codes = tensors["scales"].view(np.uint8).ravel()
        want_hist = {f"0x{v:02x}": int(n) for v, n in zip(*np.unique(sc_codes, return_counts=True))}
        c.ok(hist == want_hist, f"{label}: scale_histogram {hist} != {want_hist}")

    # the global scale of ref/recipes.md
    if has_g:
        g = tensors["global_scale"][0]
        amax = np.max(np.abs(xf)) if xf.size else F32(0)
        want_g = F32(given_g) if given_g is not None else recipe_global_scale(fmt, recipe, amax)
        c.ok(bits_equal(np.array([g], F32), np.array([want_g], F32)),
             f"{label}: global scale {g!r}, ref/recipes.md gives {want_g!r} (amax {amax!r})")
        c.ok(F32(float(meta["global_scale"])) == g or (np.isnan(g) and meta["global_scale"] == "nan"),
             f"{label}: metadata global_scale {meta['global_scale']} != {g!r}")

    # dequantize, both dtypes, against the independent product
    want = independent_dequant(fmt, tensors, shape, ax, lp)
    for dt, npdt in (("f64", np.float64), ("f32", np.float32)):
        out = c.path(f"deq_{dt}.npy")
        r = c.run("dequantize", "--in", qpath, "--out", out, "--dtype", dt)
        if not c.ok(r.returncode == 0, f"{label}: dequantize --dtype {dt} failed: {r.stderr.strip()}"):
            continue
        z = np.load(out)
        c.ok(z.dtype == npdt and z.shape == shape, f"{label}: dequantized {z.dtype} {z.shape}")
        with np.errstate(all="ignore"):
            w = want.astype(npdt)
        c.ok(bits_equal(z, w), f"{label}: dequantize {dt} differs from code*scale*global_scale "
             f"at {np.argwhere(~((z == w) | (np.isnan(z) & np.isnan(w))))[:3].tolist()}")
        # lowp's .npy is exactly what np.save writes for the same array
        with open(out, "rb") as f:
            lowp_bytes = f.read()
        np.save(c.path("ref.npy"), z)
        with open(c.path("ref.npy"), "rb") as f:
            c.ok(f.read() == lowp_bytes, f"{label}: lowp's .npy differs from np.save's bytes")
        os.remove(out)
    # accuracy sanity (finite inputs): within a third of each row's amax
    if np.all(np.isfinite(xf)) and xf.size:
        z = np.load(c.path("ref.npy")).astype(np.float64)
        rowmax = np.max(np.abs(xf.astype(np.float64)), axis=ax, keepdims=True)
        c.ok(bool(np.all(np.abs(z - xf) <= 0.34 * rowmax + 1e-30)), f"{label}: dequantized values far from x")
    return tensors


def check_safetensors_layout(c, label, path):
    """lowp's layout equals safetensors.numpy.save's for the same tensors and metadata."""
    n, hdr, data = header_of(path)
    c.ok(n % 8 == 0 and hdr.rstrip(b" ") == hdr[: len(hdr.rstrip(b" "))], f"{label}: header length {n} not padded to 8")
    ours = json.loads(hdr)
    c.ok(list(ours)[0] == "__metadata__", f"{label}: __metadata__ is not first")
    with safe_open(path, "np") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        meta = f.metadata()
    ref = stnp.save(tensors, metadata=meta)
    rn = struct.unpack("<Q", ref[:8])[0]
    theirs = json.loads(ref[8:8 + rn])
    ours_t = [(k, v) for k, v in ours.items() if k != "__metadata__"]
    theirs_t = [(k, v) for k, v in theirs.items() if k != "__metadata__"]
    c.ok(ours_t == theirs_t, f"{label}: tensor entries/order differ from safetensors: {ours_t} vs {theirs_t}")
    c.ok(ours["__metadata__"] == theirs["__metadata__"], f"{label}: metadata differs after a safetensors round trip")
    c.ok(data == ref[8 + rn:], f"{label}: data buffer differs from safetensors'")
    c.ok(len(hdr) == rn, f"{label}: header length {len(hdr)} vs safetensors' {rn}")


def test_round_trips(c):
    rng = np.random.default_rng(20240601)
    cases = []
    for fmt, recipes in RECIPES.items():
        bs = FORMATS[fmt][0]
        for recipe in recipes:
            # last axis, an exact multiple of the block size
            cases.append((fmt, recipe, (3, 2 * max(bs, 2)), -1, False))
            # middle axis, padded (not a multiple), 3-d
            cases.append((fmt, recipe, (2, 3 * max(bs, 2) + 5 if bs > 1 else 7, 3), 1, True))
    for fmt, recipe, shape, axis, pad in cases:
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape))).astype(np.float32)
        label = f"{fmt}/{recipe} shape {shape} axis {axis}{' pad' if pad else ''}"
        np.save(c.path("x.npy"), x)
        q = c.path("q.safetensors")
        args = ["quantize", "--format", fmt, "--recipe", recipe, "--axis", str(axis), "--in", c.path("x.npy"), "--out", q]
        if pad:
            args.append("--pad")
        r = c.run(*args)
        if not c.ok(r.returncode == 0 and r.stderr == "", f"{label}: quantize rc {r.returncode}: {r.stderr.strip()}"):
            continue
        check_quantized(c, label, x, fmt, recipe, axis, q)
        check_safetensors_layout(c, label, q)
        # deterministic: the same bytes again
        with open(q, "rb") as f:
            first = f.read()
        c.run(*args)
        with open(q, "rb") as f:
            c.ok(f.read() == first, f"{label}: quantize is not deterministic")

    # independent quantizers for two recipes that are simple to restate
    x = (rng.standard_normal((4, 64)) * 3).astype(np.float32)
    np.save(c.path("x.npy"), x)
    q = c.path("q.safetensors")
    c.run("quantize", "--format", "mxfp8", "--recipe", "ocp", "--in", c.path("x.npy"), "--out", q)
    with safe_open(q, "np") as f:
        codes, scales = f.get_tensor("codes"), f.get_tensor("scales")
    blocks = x.reshape(4, 2, 32)
    amax = np.max(np.abs(blocks), axis=-1)
    e = np.frexp(amax)[1].astype(np.int32) - 1 - 8  # floor(log2 amax) - emax(E4M3)
    c.ok(np.array_equal(scales.view(np.uint8).reshape(4, 2), (e + 127).astype(np.uint8)), "mxfp8 ocp: scale codes")
    scaled = np.clip(blocks / np.exp2(e)[..., None].astype(np.float32), -448, 448)
    want = scaled.astype(ml_dtypes.float8_e4m3fn).view(np.uint8).reshape(4, 64)
    c.ok(np.array_equal(codes.view(np.uint8), want), "mxfp8 ocp: element codes differ from ml_dtypes")

    c.run("quantize", "--format", "fp8_e4m3", "--in", c.path("x.npy"), "--out", q)
    with safe_open(q, "np") as f:
        codes, g = f.get_tensor("codes"), f.get_tensor("global_scale")[0]
    want = np.clip(x / g, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    c.ok(np.array_equal(codes.view(np.uint8), want), "fp8_e4m3 exact: element codes differ from ml_dtypes")


def test_inputs_and_options(c):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 32)).astype(np.float32)
    q = c.path("q.safetensors")
    # .safetensors input with several tensors, named by --tensor; BF16 and F16 inputs
    src = c.path("in.safetensors")
    stnp.save_file({"a": x, "b16": x.astype(ml_dtypes.bfloat16), "h": x.astype(np.float16),
                    "ints": np.arange(32, dtype=np.int32)}, src, metadata={"origin": "numpy"})
    for name, xv, dt in (("a", x, "F32"), ("b16", x.astype(ml_dtypes.bfloat16).astype(np.float32), "BF16"),
                         ("h", x.astype(np.float16).astype(np.float32), "F16")):
        r = c.run("quantize", "--format", "nvfp4", "--in", src, "--tensor", name, "--out", q)
        if c.ok(r.returncode == 0, f"--tensor {name}: {r.stderr.strip()}"):
            check_quantized(c, f"--tensor {name}", xv, "nvfp4", "exact", -1, q)
            with safe_open(q, "np") as f:
                c.ok(f.metadata()["input_dtype"] == dt, f"--tensor {name}: input_dtype {f.metadata()['input_dtype']}")
    # the only tensor of a file needs no name
    stnp.save_file({"only": x}, c.path("one.safetensors"))
    r = c.run("quantize", "--format", "mxfp4", "--in", c.path("one.safetensors"), "--out", q)
    c.ok(r.returncode == 0, f"single-tensor safetensors: {r.stderr.strip()}")
    # F64 input: rounded once, with a note
    x64 = rng.standard_normal((2, 32))
    np.save(c.path("x64.npy"), x64)
    r = c.run("quantize", "--format", "mxfp8", "--in", c.path("x64.npy"), "--out", q)
    c.ok(r.returncode == 0 and r.stderr.count("\n") == 1 and "rounded" in r.stderr,
         f"f64 input note: rc {r.returncode} stderr {r.stderr!r}")
    if r.returncode == 0:
        check_quantized(c, "f64 input", x64.astype(np.float32), "mxfp8", "ocp", -1, q)
    # --global-scale and --scale-up
    np.save(c.path("x.npy"), x)
    r = c.run("quantize", "--format", "nvfp4", "--recipe", "modelopt", "--global-scale", "0.0078125",
              "--scale-up", "--in", c.path("x.npy"), "--out", q)
    if c.ok(r.returncode == 0, f"--global-scale --scale-up: {r.stderr.strip()}"):
        check_quantized(c, "--global-scale", x, "nvfp4", "modelopt", -1, q, given_g=0.0078125, scale_up=True)
    # NaN and Inf inputs: kept, counted, a one-line note (a global scale from their amax is
    # refused, ref/recipes.md: those recipes are given one here)
    xn = x.copy()
    xn[0, 3], xn[1, 0], xn[1, 31] = np.nan, np.inf, -np.inf
    np.save(c.path("xn.npy"), xn)
    for fmt, recipe, g in (("nvfp4", "trtllm", 0.0078125), ("mxfp8", "ocp", None),
                           ("fp8_e5m2", "exact", 0.0078125), ("bf16", "exact", None)):
        gs = ["--global-scale", str(g)] if g else []
        r = c.run("quantize", "--format", fmt, "--recipe", recipe, *gs, "--in", c.path("xn.npy"), "--out", q)
        label = f"NaN/Inf input {fmt}/{recipe}"
        c.ok(r.returncode == 0 and r.stderr.count("\n") == 1 and "1 NaN and 2 Inf" in r.stderr,
             f"{label}: rc {r.returncode} stderr {r.stderr!r}")
        if r.returncode == 0:
            check_quantized(c, label, xn, fmt, recipe, -1, q, given_g=g)
    # an empty tensor and a size-1 axis with padding
    np.save(c.path("e.npy"), np.zeros((0, 32), np.float32))
    r = c.run("quantize", "--format", "mxfp4", "--in", c.path("e.npy"), "--out", q)
    if c.ok(r.returncode == 0, f"empty tensor: {r.stderr.strip()}"):
        check_quantized(c, "empty tensor", np.zeros((0, 32), np.float32), "mxfp4", "ocp", -1, q)
    x1 = rng.standard_normal((5, 1)).astype(np.float32)
    np.save(c.path("x1.npy"), x1)
    r = c.run("quantize", "--format", "nvfp4", "--recipe", "trtllm", "--pad", "--in", c.path("x1.npy"), "--out", q)
    if c.ok(r.returncode == 0, f"size-1 axis: {r.stderr.strip()}"):
        check_quantized(c, "size-1 axis padded", x1, "nvfp4", "trtllm", -1, q)


def expect_error(c, label, args, out):
    """exit 2, one 'lowp: ' line on stderr, no output file, no temporary beside it."""
    if os.path.exists(out):
        os.remove(out)
    r = c.run(*args)
    lines = r.stderr.splitlines()
    c.ok(r.returncode == 2, f"{label}: exit {r.returncode}, expected 2 (stderr {r.stderr!r})")
    c.ok(len(lines) == 1 and lines[0].startswith("lowp: "), f"{label}: stderr is not one 'lowp:' line: {r.stderr!r}")
    c.ok(not os.path.exists(out), f"{label}: output file left behind")
    d = os.path.dirname(out)
    leftovers = [f for f in os.listdir(d) if ".tmp." in f]
    c.ok(not leftovers, f"{label}: temporaries left behind: {leftovers}")


def test_bad_input(c):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 32)).astype(np.float32)
    good = c.path("good.npy")
    np.save(good, x)
    out = c.path("bad_out.safetensors")
    q = ["quantize", "--format", "nvfp4"]

    def npy_bytes(header_dict, data=b"\0" * 8):
        h = header_dict.encode()
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data

    files = {
        "truncated.npy": open(good, "rb").read()[:-5],
        "fortran.npy": npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n"),
        "bigendian.npy": npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }\n"),
        "void.npy": npy_bytes("{'descr': '<V2', 'fortran_order': False, 'shape': (4,), }\n"),
        "lying.npy": npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }\n"),
        "overflow.npy": npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }\n"),
        "garbage.safetensors": b"\xff" * 64,
        "lying.safetensors": struct.pack("<Q", 1 << 40) + b"{}",
    }
    for name, data in files.items():
        with open(c.path(name), "wb") as f:
            f.write(data)
    np.save(c.path("ints.npy"), np.arange(32, dtype=np.int32).reshape(1, 32))
    np.save(c.path("scalar.npy"), np.float32(1.0))
    np.save(c.path("bf16_mldtypes.npy"), x.astype(ml_dtypes.bfloat16))
    stnp.save_file({"a": x, "b": x}, c.path("two.safetensors"))

    cases = [
        ("no arguments", ["quantize"]),
        ("missing --format", ["quantize", "--in", good, "--out", out]),
        ("missing --out", q + ["--in", good]),
        ("unknown format", ["quantize", "--format", "nvfp5", "--in", good, "--out", out]),
        ("unknown recipe", q + ["--recipe", "fast", "--in", good, "--out", out]),
        ("recipe not of the format", ["quantize", "--format", "mxfp4", "--recipe", "sglang-kv", "--in", good, "--out", out]),
        ("--scale-up on mxfp8", ["quantize", "--format", "mxfp8", "--scale-up", "--in", good, "--out", out]),
        ("--scale-up on trtllm", q + ["--recipe", "trtllm", "--scale-up", "--in", good, "--out", out]),
        ("--global-scale on mx", ["quantize", "--format", "mxfp8", "--global-scale", "1", "--in", good, "--out", out]),
        ("--global-scale negative", q + ["--global-scale", "-1", "--in", good, "--out", out]),
        ("--global-scale zero", q + ["--global-scale", "0", "--in", good, "--out", out]),
        ("--global-scale inf", q + ["--global-scale", "inf", "--in", good, "--out", out]),
        ("--global-scale text", q + ["--global-scale", "abc", "--in", good, "--out", out]),
        ("axis out of range", q + ["--axis", "2", "--in", good, "--out", out]),
        ("axis negative out of range", q + ["--axis", "-3", "--in", good, "--out", out]),
        ("axis text", q + ["--axis", "x", "--in", good, "--out", out]),
        ("axis not a multiple", q + ["--axis", "0", "--in", good, "--out", out]),
        ("output not safetensors", q + ["--in", good, "--out", c.path("bad_out.npy")]),
        ("input missing", q + ["--in", c.path("missing.npy"), "--out", out]),
        ("input extension", q + ["--in", c.path("x.bin"), "--out", out]),
        ("truncated npy", q + ["--in", c.path("truncated.npy"), "--out", out]),
        ("fortran order", q + ["--in", c.path("fortran.npy"), "--out", out]),
        ("big-endian", q + ["--in", c.path("bigendian.npy"), "--out", out]),
        ("ml_dtypes bf16 npy", q + ["--in", c.path("bf16_mldtypes.npy"), "--out", out]),
        ("void descr", q + ["--in", c.path("void.npy"), "--out", out]),
        ("lying npy shape", q + ["--in", c.path("lying.npy"), "--out", out]),
        ("overflowing npy shape", q + ["--in", c.path("overflow.npy"), "--out", out]),
        ("integer input", q + ["--in", c.path("ints.npy"), "--out", out]),
        ("0-d input", q + ["--in", c.path("scalar.npy"), "--out", out]),
        ("--tensor on npy", q + ["--in", good, "--tensor", "a", "--out", out]),
        ("two tensors, no name", q + ["--in", c.path("two.safetensors"), "--out", out]),
        ("unknown tensor name", q + ["--in", c.path("two.safetensors"), "--tensor", "zz", "--out", out]),
        ("garbage safetensors", q + ["--in", c.path("garbage.safetensors"), "--out", out]),
        ("lying safetensors length", q + ["--in", c.path("lying.safetensors"), "--out", out]),
        ("unknown option", q + ["--in", good, "--out", out, "--frobnicate"]),
    ]
    for label, args in cases:
        expect_error(c, f"quantize {label}", args, out)

    # dequantize: files that are not, or no longer, what quantize wrote
    qf = c.path("q.safetensors")
    r = c.run("quantize", "--format", "nvfp4", "--in", good, "--out", qf)
    c.ok(r.returncode == 0, f"quantize for the dequantize cases: {r.stderr.strip()}")
    with safe_open(qf, "np") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
        meta = f.metadata()

    def tampered(name, t_changes=None, m_changes=None):
        t = dict(tensors)
        m = dict(meta)
        for k, v in (t_changes or {}).items():
            if v is None:
                t.pop(k)
            else:
                t[k] = v
        for k, v in (m_changes or {}).items():
            if v is None:
                m.pop(k)
            else:
                m[k] = v
        p = c.path(name)
        stnp.save_file(t, p, metadata=m)
        return p

    dout = c.path("bad_out.npy")
    d_cases = [
        ("plain safetensors", c.path("two.safetensors")),
        ("no layout", tampered("t1.safetensors", m_changes={"layout": None})),
        ("other layout", tampered("t2.safetensors", m_changes={"layout": "other"})),
        ("format changed", tampered("t3.safetensors", m_changes={"format": "mxfp4"})),
        ("block size changed", tampered("t4.safetensors", m_changes={"block_size": "32"})),
        ("shape changed", tampered("t5.safetensors", m_changes={"shape": "[2, 48]"})),
        ("shape not a list", tampered("t6.safetensors", m_changes={"shape": "2x32"})),
        ("axis out of range", tampered("t7.safetensors", m_changes={"axis": "2"})),
        ("padded size wrong", tampered("t8.safetensors", m_changes={"padded_axis_size": "48"})),
        ("scales missing", tampered("t9.safetensors", t_changes={"scales": None})),
        ("global scale missing", tampered("t10.safetensors", t_changes={"global_scale": None})),
        ("extra tensor", tampered("t11.safetensors", t_changes={"extra": np.zeros(1, np.float32)})),
        ("codes dtype changed", tampered("t12.safetensors", t_changes={"codes": tensors["codes"].view(np.int8)})),
        ("scales shape changed", tampered("t13.safetensors", t_changes={"scales": tensors["scales"].reshape(-1)})),
        ("truncated file", None),
    ]
    with open(qf, "rb") as f:
        raw = f.read()
    with open(c.path("trunc.safetensors"), "wb") as f:
        f.write(raw[:-3])
    for label, path in d_cases:
        path = path or c.path("trunc.safetensors")
        expect_error(c, f"dequantize {label}", ["dequantize", "--in", path, "--out", dout], dout)
    expect_error(c, "dequantize --dtype f16", ["dequantize", "--in", qf, "--out", dout, "--dtype", "f16"], dout)
    expect_error(c, "dequantize output not npy", ["dequantize", "--in", qf, "--out", c.path("bad_out.safetensors")],
                 c.path("bad_out.safetensors"))
    expect_error(c, "dequantize input npy", ["dequantize", "--in", good, "--out", dout], dout)
    expect_error(c, "dequantize missing input", ["dequantize", "--in", c.path("nope.safetensors"), "--out", dout], dout)
    # an existing output survives a failed run untouched
    with open(dout, "wb") as f:
        f.write(b"keep")
    r = c.run("dequantize", "--in", c.path("trunc.safetensors"), "--out", dout)
    with open(dout, "rb") as f:
        c.ok(r.returncode == 2 and f.read() == b"keep", "a failed dequantize changed the existing output")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lowp", required=True, help="path to the lowp binary")
    args = ap.parse_args()
    if not os.access(args.lowp, os.X_OK):
        print(f"interop_tensors: {args.lowp} is not executable")
        return 1
    with tempfile.TemporaryDirectory(prefix="lowp_interop_tensors.") as tmp:
        c = Checker(os.path.abspath(args.lowp), tmp)
        test_round_trips(c)
        test_inputs_and_options(c)
        test_bad_input(c)
    print(f"interop_tensors: {c.passed} passed, {c.failed} failed "
          f"(numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}, safetensors {safetensors.__version__})")
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
