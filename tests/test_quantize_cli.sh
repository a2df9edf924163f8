#!/bin/sh
# tests/test_quantize_cli.sh LOWP PYTHON: `lowp quantize` on NaN / Inf inputs and
# `lowp dequantize` on tampered files.
#
#   - quantize: where the global scale comes from the tensor amax (nvfp4 trtllm, exact,
#     modelopt; fp8 exact) one NaN or Inf input is refused (exit 2, one "lowp: " line, no
#     file); where it does not (nvfp4 sglang-kv, mx, bf16, or --global-scale given) the
#     input is quantized, the non-finite inputs counted, and every finite element of a
#     block without them decodes as it does without the NaN (ref/recipes.md, "NaN and Inf
#     inputs");
#   - dequantize: a file quantize wrote, then tampered with - global scale NaN / Inf / 0 /
#     negative, a negative E4M3 block scale, metadata that disagrees with the tensors
#     (shape, block size, format, axis, padding, global scale, element count) - is refused
#     with one line and exit 2, and nothing is written; the untampered file decodes.
# Files are edited by numpy / json in PYTHON; exit 77 (skip) without numpy.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_quantize_cli "$1"
cli_test_need_numpy "${2:-python3}"
cat > "$tmp/t.py" <<'EOF'
import json, os, struct
import numpy as np
import cli_check as cc
from cli_check import bad, refused

lowp, tmp = cc.start("test_quantize_cli")


def accepted(name, args, out):
    p = cc.run(args)
    if p.returncode != 0 or not os.path.exists(out):
        return bad(f"{name}: exit {p.returncode} ({p.stderr.strip().splitlines()[:2]})")
    cc.ok()
    return True


def st_read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), bytearray(b[8 + n:])


def st_write(p, h, data):
    j = json.dumps(h, separators=(",", ":")).encode()
    j += b" " * (-len(j) % 8)
    open(p, "wb").write(struct.pack("<Q", len(j)) + j + bytes(data))


rng = np.random.default_rng(7)
x = rng.standard_normal((4, 64)).astype(np.float32)
xp = os.path.join(tmp, "x.npy")
np.save(xp, x)
xn = x.copy()
xn[1, 5] = np.nan  # in block 0 of row 1 (16- and 32-element blocks)
xnp = os.path.join(tmp, "xn.npy")
np.save(xnp, xn)
xi = x.copy()
xi[3, 63] = -np.inf
xip = os.path.join(tmp, "xi.npy")
np.save(xip, xi)
y = os.path.join(tmp, "y.safetensors")
z = os.path.join(tmp, "z.npy")

# ---- quantize: NaN / Inf where the global scale comes from the amax ----------------------
from_amax = [("nvfp4", "trtllm"), ("nvfp4", "exact"), ("nvfp4", "modelopt"), ("fp8_e4m3", "exact"),
             ("fp8_e5m2", "exact")]
no_amax = [("nvfp4", "sglang-kv"), ("mxfp4", "ocp"), ("mxfp4", "rceil"), ("mxfp8", "trtllm"),
           ("mxfp8", "ocp"), ("bf16", "exact")]
for f, r in from_amax:
    for name, p in (("NaN", xnp), ("Inf", xip)):
        refused(f"quantize {f} {r} with a {name}", ["quantize", "--format", f, "--recipe", r,
                                                     "--in", p, "--out", y], y, "--in")
    # a given global scale does not use the amax: accepted
    g = "0.001" if f == "nvfp4" else "0.01"
    accepted(f"quantize {f} {r} with a NaN and --global-scale",
             ["quantize", "--format", f, "--recipe", r, "--global-scale", g, "--in", xnp, "--out", y], y)
for f, r in no_amax:
    base = os.path.join(tmp, "base.npy")
    if not (accepted(f"quantize {f} {r} clean", ["quantize", "--format", f, "--recipe", r, "--in", xp,
                                                  "--out", y], y) and
            accepted(f"dequantize {f} {r} clean", ["dequantize", "--in", y, "--out", base], base)):
        continue
    if not accepted(f"quantize {f} {r} with a NaN", ["quantize", "--format", f, "--recipe", r,
                                                      "--in", xnp, "--out", y], y):
        continue
    h, _ = st_read(y)
    if h["__metadata__"]["count_nan_in"] != "1":
        bad(f"quantize {f} {r}: count_nan_in {h['__metadata__']['count_nan_in']}, expected 1")
    if accepted(f"dequantize {f} {r} with a NaN", ["dequantize", "--in", y, "--out", z], z):
        a, b = np.load(base), np.load(z)
        # rows 0, 2, 3 hold no NaN: their values are those of the clean input
        same = np.array_equal(a[[0, 2, 3]], b[[0, 2, 3]])
        if not same:
            bad(f"{f} {r}: a NaN in row 1 changed the decoded rows 0, 2, 3")

# ---- dequantize: tampered files --------------------------------------------------------------
def tampered(name, fmt, edit, pat, recipe=None):
    src = os.path.join(tmp, f"src_{fmt}.safetensors")
    if not os.path.exists(src):
        args = ["quantize", "--format", fmt, "--in", xp, "--out", src]
        if recipe:
            args += ["--recipe", recipe]
        if not accepted(f"quantize {fmt}", args, src):
            return
    h, data = st_read(src)
    edit(h, data)
    t = os.path.join(tmp, "t.safetensors")
    st_write(t, h, data)
    refused(f"dequantize {fmt}: {name}", ["dequantize", "--in", t, "--out", z], z, pat)


def meta(key, value):
    def e(h, data):
        h["__metadata__"][key] = value
    return e


def f32_at(tensor, value):
    def e(h, data):
        o = h[tensor]["data_offsets"][0]
        data[o:o + 4] = struct.pack("<f", value)
    return e


def byte_at(tensor, index, value):
    def e(h, data):
        data[h[tensor]["data_offsets"][0] + index] = value
    return e


for fmt in ("nvfp4", "fp8_e4m3"):
    for v, what in ((float("nan"), "NaN"), (float("inf"), "Inf"), (0.0, "zero"), (-0.5, "negative"),
                    (-0.0, "minus zero")):
        tampered(f"global scale {what}", fmt, f32_at("global_scale", v), "global")
tampered("negative E4M3 block scale", "nvfp4", byte_at("scales", 5, 0xB8), "scale")
tampered("minus-zero E4M3 block scale", "nvfp4", byte_at("scales", 0, 0x80), "scale")
tampered("metadata shape [2, 128]", "nvfp4", meta("shape", "[2, 128]"), "shape")
tampered("metadata shape [4, 64, 1]", "nvfp4", meta("shape", "[4, 64, 1]"), "")
tampered("metadata block_size 32", "nvfp4", meta("block_size", "32"), "block_size")
tampered("metadata format mxfp4", "nvfp4", meta("format", "mxfp4"), "")
tampered("metadata format fp8_e5m2", "fp8_e4m3", meta("format", "fp8_e5m2"), "")
tampered("metadata axis 0", "nvfp4", meta("axis", "0"), "")
tampered("metadata padded_axis_size 80", "nvfp4", meta("padded_axis_size", "80"), "padded_axis_size")
tampered("metadata global_scale disagrees with the tensor", "nvfp4", meta("global_scale", "0.5"),
         "global_scale")
tampered("metadata global_scale on a format without one", "mxfp8", meta("global_scale", "0.5"),
         "global_scale")
tampered("metadata count_elements 255", "nvfp4", meta("count_elements", "255"), "count_elements")
tampered("metadata count_padding 1", "nvfp4", meta("count_padding", "1"), "count_padding")
# and the untampered files decode to their input's shape
for fmt in ("nvfp4", "fp8_e4m3", "mxfp8"):
    src = os.path.join(tmp, f"src_{fmt}.safetensors")
    if accepted(f"dequantize {fmt} untampered", ["dequantize", "--in", src, "--out", z], z):
        if np.load(z).shape != x.shape:
            bad(f"dequantize {fmt}: shape {np.load(z).shape}")

cc.end()
EOF
cli_test_py "$tmp/t.py" "$lowp" "$tmp"
