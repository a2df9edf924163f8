"""vectors/certify/make.py: the golden vectors of `lowp certify`, one folder per case: decode,
extend / prefill (--qo-indptr) and quantize-on-write (--kv-write).

Each case holds the framework's tensors as they sit in memory (.npy), `args` (the
`lowp certify` arguments, one per line, paths relative to the case folder) and `expect`
(the exit status, then lines that the report must contain). tests/test_certify_vectors.sh
runs them. Regenerate with (from the repository root, liblowp built):

    LOWP_LIBRARY=build/ref/liblowp.so python3 vectors/certify/make.py vectors/certify

The caches are quantized by lowp's cache model (lowp.quantize) and arranged here in each
owner's memory order, written from the owners' formulas (independently of the C adapters
they check; lowp/certify.h cites the sources):
  vllm-fp8      [num_blocks, block_size, H, D] uint8;
  flashinfer    [pages, H, page_size, D] (HND) uint8 fp8;
  sglang-nvfp4  codes [size, H, D/2] slot-major, native scales [pages, H, page_size, D/16],
                V scales 4-token interleaved: tile index (t//4)*4*S + s*4 + t%4;
  trtllm        codes [pages, H, page_size, D/2], scales as SGLang's native ones.
The kernel is a numpy fp32 decode of the logical (dequantized) values, declared as
`--p-dtype f32 --out-dtype f32`. Invalid cases: bytes in one order declared in another,
a kernel that ignores v_scale, a NaN in the output.

Extend: the same kernel over ragged causal chunks (qo_indptr, int32 [batch + 1]; query i of
sequence b at position prefix_b + i sees 0 .. prefix_b + i), with a prefill (prefix 0) and a
one-token chunk; the invalid case lets query i see prefix_b + i + 1 (a causal off-by-one).
Quantize-on-write: BF16 token values (stored as float32 .npy, exactly BF16) and a slot
mapping (int64, page * page_size + slot, -1 a vLLM padding token) in; the pools a writer
leaves, in the owner's layout, out (unwritten slots 0). The FP8 bytes are checked here
against ml_dtypes' float8_e4m3fn of fl32(x / scale) (vLLM's cvt(x / scale)), independently of
lowp; the NVFP4 bytes are lowp's cache model's (recipe sglang-kv, SGLang's). Invalid cases:
V scales written linearly for SGLang's interleaved layout; NVFP4 rounded by another recipe
(trtllm); FP8 written as x * fl32(1 / scale)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import lowp  # noqa: E402

B, H, G, D, P = 2, 2, 2, 64, 16
S = D // 16
SEQ = np.array([37, 20], np.int32)


def e4m3(c):
    c = c.astype(np.int64)
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return np.where(s == 1, -v, v)


def e2m1_pairs(codes):
    mag = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    lo, hi = codes & 15, codes >> 4
    val = lambda n: np.where(n & 8, -1.0, 1.0) * mag[n & 7]  # noqa: E731
    out = np.empty(codes.shape[:-1] + (codes.shape[-1] * 2,))
    out[..., 0::2], out[..., 1::2] = val(lo), val(hi)
    return out


def pages_table(rng, npages, P=P, seq=SEQ):
    need = [(int(n) + P - 1) // P for n in seq]
    perm = rng.permutation(npages)[: sum(need)].astype(np.int32)
    bt = np.full((len(seq), max(need)), -1, np.int32)
    at = 0
    for b, k in enumerate(need):
        bt[b, :k] = perm[at: at + k]
        at += k
    return bt


def kernel(q, K, V, bt, vs):
    """fp32 decode over logical K, V [pages, P, H, D] (global scales: K's inside, V's vs)."""
    return extend_kernel(q, K, V, bt, vs, SEQ, np.arange(B + 1))


def extend_kernel(q, K, V, bt, vs, seq, qo, shift=0):
    """fp32 causal extend: query i of sequence b (its last qo[b+1] - qo[b] tokens) sees
    positions 0 .. prefix + i + shift (clipped at the sequence's end; shift 1: off by one)."""
    P, H = K.shape[1], K.shape[2]
    G = q.shape[1] // H
    out = np.empty((q.shape[0], H * G, D), np.float32)
    for b in range(len(seq)):
        n, ql = int(seq[b]), int(qo[b + 1] - qo[b])
        pg = bt[b, : (n + P - 1) // P]
        k = K[pg].reshape(-1, H, D)[:n].astype(np.float32)
        v = V[pg].reshape(-1, H, D)[:n].astype(np.float32)
        for i in range(ql):
            t, vis = int(qo[b]) + i, min(n - ql + i + 1 + shift, n)
            for h in range(H * G):
                s = k[:vis, h // G] @ q[t, h] * np.float32(1 / np.sqrt(D))
                p = np.exp(s - s.max())
                out[t, h] = (p @ v[:vis, h // G]) / p.sum() * np.float32(vs)
    return out


def interleave(sf):
    """[pages, H, P, S] linear -> 4-token interleaved within each [P, S] tile."""
    t, s = np.meshgrid(np.arange(P), np.arange(S), indexing="ij")
    flat = (t // 4) * 4 * S + s * 4 + t % 4
    out = np.empty_like(sf).reshape(sf.shape[0], sf.shape[1], P * S)
    out[..., flat.ravel()] = sf.reshape(sf.shape[0], sf.shape[1], P * S)
    return out.reshape(sf.shape)


def write(root, name, arrays, args, expect):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    for k, a in arrays.items():
        np.save(os.path.join(d, k + ".npy"), a)
    with open(os.path.join(d, "args"), "w") as f:
        f.write("\n".join(args) + "\n")
    with open(os.path.join(d, "expect"), "w") as f:
        f.write("\n".join(expect) + "\n")


def fp8_cases(root, rng):
    npages, ks, vs = 6, 0.03, 0.02
    kc, _ = lowp.quantize(rng.normal(size=(npages, P, H, D)) * 4, "fp8_e4m3", ks)
    vc, _ = lowp.quantize(rng.normal(size=(npages, P, H, D)) * 4, "fp8_e4m3", vs)
    bt = pages_table(rng, npages)
    q = rng.normal(size=(B, H * G, D)).astype(np.float32)
    out = kernel(q, e4m3(kc) * ks, e4m3(vc), bt, vs)
    common = ["--k-cache", "k.npy", "--v-cache", "v.npy", "--k-scale", repr(ks), "--v-scale", repr(vs),
              "--q", "q.npy", "--out", "out.npy", "--p-dtype", "f32", "--out-dtype", "f32"]
    table = {"block_table": bt, "seq_lens": SEQ}
    targs = ["--block-table", "block_table.npy", "--seq-lens", "seq_lens.npy"]
    write(root, "vllm-fp8.valid", dict(k=kc, v=vc, q=q, out=out, **table), ["--layout", "vllm-fp8"] + common + targs,
          ["0", "outside bound 0, nan mismatch 0"])
    bad = kernel(q, e4m3(kc) * ks, e4m3(vc), bt, 1.0)
    write(root, "vllm-fp8.ignored-v-scale", dict(k=kc, v=vc, q=q, out=bad, **table),
          ["--layout", "vllm-fp8"] + common + targs, ["1", "diagnosis: the kernel looks to ignore v_scale"])
    # FlashInfer HND: [pages, H, P, D], CSR page table. num_heads = page_size = 8 (vLLM #53681's
    # case), so that the bytes read as NHD fit every shape and only the numbers tell
    P8 = H8 = 8
    kc, _ = lowp.quantize(rng.normal(size=(9, P8, H8, D)) * 4, "fp8_e4m3", ks)
    vc, _ = lowp.quantize(rng.normal(size=(9, P8, H8, D)) * 4, "fp8_e4m3", vs)
    bt = pages_table(rng, 9, P8)
    q = rng.normal(size=(B, 2 * H8, D)).astype(np.float32)
    out = kernel(q, e4m3(kc) * ks, e4m3(vc), bt, vs)
    khnd, vhnd = np.ascontiguousarray(kc.transpose(0, 2, 1, 3)), np.ascontiguousarray(vc.transpose(0, 2, 1, 3))
    indptr = np.concatenate([[0], np.cumsum((SEQ + P8 - 1) // P8)]).astype(np.int32)
    indices = np.concatenate([bt[b, : (SEQ[b] + P8 - 1) // P8] for b in range(B)]).astype(np.int32)
    last = (SEQ - ((SEQ + P8 - 1) // P8 - 1) * P8).astype(np.int32)
    csr = dict(indptr=indptr, indices=indices, last_page_len=last)
    cargs = ["--indptr", "indptr.npy", "--indices", "indices.npy", "--last-page-len", "last_page_len.npy"]
    write(root, "flashinfer-fp8-hnd.valid", dict(k=khnd, v=vhnd, q=q, out=out, **csr),
          ["--layout", "flashinfer", "--page-order", "hnd"] + common + cargs, ["0", "outside bound 0, nan mismatch 0"])
    write(root, "flashinfer-fp8-hnd.declared-nhd", dict(k=khnd, v=vhnd, q=q, out=out, **csr),
          ["--layout", "flashinfer", "--page-order", "nhd"] + common + cargs,
          ["1", "diagnosis: HND/NHD swapped: the pages look hnd, layout says nhd"])


def nvfp4_cases(root, rng):
    npages, kg, vg = 5, 0.01, 0.015
    x = rng.normal(size=(2, npages, P, H, D)) * np.array([3.0, 5.0])[:, None, None, None, None]
    (kc, ksf), (vc, vsf) = (lowp.quantize(x[i], "nvfp4", g) for i, g in ((0, kg), (1, vg)))
    K = e2m1_pairs(kc) * np.repeat(e4m3(ksf), 16, axis=-1) * kg  # logical [pages, P, H, D]
    V = e2m1_pairs(vc) * np.repeat(e4m3(vsf), 16, axis=-1) * vg
    bt = pages_table(rng, npages)
    q = rng.normal(size=(B, H * G, D)).astype(np.float32)
    out = kernel(q, K, V, bt, 1.0)
    hnd = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))  # noqa: E731
    ksf_n, vsf_n = hnd(ksf), interleave(hnd(vsf))  # native scale pools, V interleaved
    common = ["--k-sf", "k_sf.npy", "--v-sf", "v_sf.npy", "--k-cache", "k.npy", "--v-cache", "v.npy",
              "--k-scale", repr(kg), "--v-scale", repr(vg), "--q", "q.npy", "--out", "out.npy",
              "--block-table", "block_table.npy", "--seq-lens", "seq_lens.npy", "--p-dtype", "f32",
              "--out-dtype", "f32"]
    table = {"block_table": bt, "seq_lens": SEQ, "q": q}
    sg = dict(k=kc.reshape(npages * P, H, D // 2), v=vc.reshape(npages * P, H, D // 2), k_sf=ksf_n, v_sf=vsf_n)
    write(root, "sglang-nvfp4.valid", dict(out=out, **sg, **table), ["--layout", "sglang-nvfp4"] + common,
          ["0", "outside bound 0, nan mismatch 0"])
    lin = dict(sg, v_sf=hnd(vsf))  # V scales written linearly (vLLM #50085's mismatch, reversed)
    write(root, "sglang-nvfp4.v-scales-linear", dict(out=out, **lin, **table), ["--layout", "sglang-nvfp4"] + common,
          ["1", "diagnosis: V scales look linear, layout says 4-token interleaved"])
    tr = dict(k=hnd(kc), v=hnd(vc), k_sf=ksf_n, v_sf=vsf_n)
    write(root, "trtllm.valid", dict(out=out, **tr, **table), ["--layout", "trtllm"] + common,
          ["0", "outside bound 0, nan mismatch 0"])
    nan = out.copy()
    nan[1, 3, 17] = np.nan
    write(root, "trtllm.nan-output", dict(out=nan, **tr, **table), ["--layout", "trtllm"] + common,
          ["1", "nan mismatch 1", "nan-mismatch"])


def extend_cases(root, rng):
    """Ragged causal chunks: (prefix, chunk) (0, 5) a prefill, (37, 1), (20, 7) (NVFP4);
    (0, 16), (30, 3), (20, 1) (FP8)."""
    ok = ["0", "outside bound 0, nan mismatch 0", "extend: 13 causal queries over 3 sequences"]
    seq, qo = np.array([5, 38, 27], np.int32), np.array([0, 5, 6, 13], np.int32)
    npages, kg, vg = 8, 0.01, 0.015
    x = rng.normal(size=(2, npages, P, H, D)) * np.array([3.0, 5.0])[:, None, None, None, None]
    (kc, ksf), (vc, vsf) = (lowp.quantize(x[i], "nvfp4", g) for i, g in ((0, kg), (1, vg)))
    K = e2m1_pairs(kc) * np.repeat(e4m3(ksf), 16, axis=-1) * kg
    V = e2m1_pairs(vc) * np.repeat(e4m3(vsf), 16, axis=-1) * vg
    bt = pages_table(rng, npages, seq=seq)
    q = rng.normal(size=(int(qo[-1]), H * G, D)).astype(np.float32)
    hnd = lambda a: np.ascontiguousarray(a.transpose(0, 2, 1, 3))  # noqa: E731
    sg = dict(k=kc.reshape(npages * P, H, D // 2), v=vc.reshape(npages * P, H, D // 2), k_sf=hnd(ksf),
              v_sf=interleave(hnd(vsf)), block_table=bt, seq_lens=seq, qo_indptr=qo, q=q)
    args = ["--layout", "sglang-nvfp4", "--k-sf", "k_sf.npy", "--v-sf", "v_sf.npy", "--k-cache", "k.npy",
            "--v-cache", "v.npy", "--k-scale", repr(kg), "--v-scale", repr(vg), "--q", "q.npy", "--out", "out.npy",
            "--block-table", "block_table.npy", "--seq-lens", "seq_lens.npy", "--qo-indptr", "qo_indptr.npy",
            "--p-dtype", "f32", "--out-dtype", "f32"]
    write(root, "sglang-nvfp4-extend.valid", dict(out=extend_kernel(q, K, V, bt, 1.0, seq, qo), **sg), args, ok)
    write(root, "sglang-nvfp4-extend.causal-off-by-one", dict(out=extend_kernel(q, K, V, bt, 1.0, seq, qo, 1), **sg),
          args, ["1", "diagnosis: causal mask off by one"])
    seq, qo = np.array([16, 33, 21], np.int32), np.array([0, 16, 19, 20], np.int32)
    npages, ks, vs = 7, 0.03, 0.02
    kc, _ = lowp.quantize(rng.normal(size=(npages, P, H, D)) * 4, "fp8_e4m3", ks)
    vc, _ = lowp.quantize(rng.normal(size=(npages, P, H, D)) * 4, "fp8_e4m3", vs)
    bt = pages_table(rng, npages, seq=seq)
    q = rng.normal(size=(int(qo[-1]), H * G, D)).astype(np.float32)
    out = extend_kernel(q, e4m3(kc) * ks, e4m3(vc), bt, vs, seq, qo)
    write(root, "vllm-fp8-extend.valid", dict(k=kc, v=vc, q=q, out=out, block_table=bt, seq_lens=seq, qo_indptr=qo),
          ["--layout", "vllm-fp8", "--k-cache", "k.npy", "--v-cache", "v.npy", "--k-scale", repr(ks), "--v-scale",
           repr(vs), "--q", "q.npy", "--out", "out.npy", "--block-table", "block_table.npy", "--seq-lens",
           "seq_lens.npy", "--qo-indptr", "qo_indptr.npy", "--p-dtype", "f32", "--out-dtype", "f32"],
          ["0", "outside bound 0, nan mismatch 0", "extend: 20 causal queries over 3 sequences"])


def bf16_values(rng, shape, sigma):
    import ml_dtypes
    return (rng.normal(size=shape) * sigma).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def kv_write_cases(root, rng):
    import ml_dtypes
    npages, T = 4, 24
    slots = rng.permutation(npages * P)[:T].astype(np.int64)  # page * page_size + slot
    kx, vx = bf16_values(rng, (T, H, D), 2.0), bf16_values(rng, (T, H, D), 3.0)
    tokens = dict(slot_mapping=slots, k_in=kx, v_in=vx)
    targs = ["--slot-mapping", "slot_mapping.npy", "--k-in", "k_in.npy", "--v-in", "v_in.npy"]
    ok = ["0", "differs 0"]
    # SGLang NVFP4: k_buffer [size, H, D/2] at the slot, native scales [pages, H, P, D/16], V interleaved
    kg, vg = 0.01, 0.015
    hnd = lambda a: np.ascontiguousarray(a.reshape(npages, P, H, S).transpose(0, 2, 1, 3))  # noqa: E731

    def sglang(recipe):
        (kc, ksf), (vc, vsf) = (lowp.quantize(x, "nvfp4", g, recipe=recipe) for x, g in ((kx, kg), (vx, vg)))
        pools = {n: np.zeros((npages * P, H, w), np.uint8) for n, w in
                 (("k", D // 2), ("v", D // 2), ("k_lin", S), ("v_lin", S))}
        pools["k"][slots], pools["v"][slots], pools["k_lin"][slots], pools["v_lin"][slots] = kc, vc, ksf, vsf
        return dict(k=pools["k"], v=pools["v"], k_sf=hnd(pools["k_lin"])), hnd(pools["v_lin"])
    args = ["--kv-write", "--layout", "sglang-nvfp4", "--k-cache", "k.npy", "--v-cache", "v.npy", "--k-sf", "k_sf.npy",
            "--v-sf", "v_sf.npy", "--k-scale", repr(kg), "--v-scale", repr(vg)] + targs
    pools, vlin = sglang("sglang-kv")
    write(root, "sglang-nvfp4-kv-write.valid", dict(v_sf=interleave(vlin), **pools, **tokens), args, ok)
    write(root, "sglang-nvfp4-kv-write.v-scales-linear", dict(v_sf=vlin, **pools, **tokens), args,
          ["1", "first difference: token", "V block scales",
           "diagnosis: V scales look linear, layout says 4-token interleaved"])
    other, ovlin = sglang("trtllm")
    assert any(np.any(other[n] != pools[n]) for n in pools), "trtllm and sglang-kv round these tokens alike"
    write(root, "sglang-nvfp4-kv-write.recipe-trtllm", dict(v_sf=interleave(ovlin), **other, **tokens), args,
          ["1", "recipe sglang-kv", "first difference: token"])
    # vLLM FP8: [num_blocks, block_size, H, D] uint8, fp8 = cvt(x / scale); token 3 is padding (slot -1)
    ks, vs = 0.03, 0.02
    vslots = slots.copy()
    vslots[3] = -1
    live = vslots >= 0

    def vllm(conv):
        kp, vp = np.zeros((npages * P, H, D), np.uint8), np.zeros((npages * P, H, D), np.uint8)
        kp[vslots[live]], vp[vslots[live]] = conv(kx[live], ks), conv(vx[live], vs)
        return dict(k=kp.reshape(npages, P, H, D), v=vp.reshape(npages, P, H, D))
    # __nv_cvt_float_to_fp8(v, __NV_SATFINITE, E4M3): RN, and +-448 past the range (a clip first
    # is the same: RN of 448 .. 464 is 448 already)
    sat = lambda v: np.clip(v, -448, 448).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)  # noqa: E731
    div = lambda x, s: sat(x / np.float32(s))  # noqa: E731
    rcp = lambda x, s: sat(x * (np.float32(1) / np.float32(s)))  # noqa: E731
    for x, sc in ((kx, ks), (vx, vs)):  # lowp's cache model is vLLM's division, byte for byte
        assert np.array_equal(lowp.quantize(x, "fp8_e4m3", sc)[0], div(x, sc)), "lowp fp8 write != cvt(x / scale)"
    vtok = dict(tokens, slot_mapping=vslots)
    args = ["--kv-write", "--layout", "vllm-fp8", "--k-cache", "k.npy", "--v-cache", "v.npy", "--k-scale", repr(ks),
            "--v-scale", repr(vs)] + targs
    write(root, "vllm-fp8-kv-write.valid", dict(**vllm(div), **vtok), args, ok + ["padding 1"])
    bad = vllm(rcp)
    assert any(np.any(bad[n] != vllm(div)[n]) for n in bad), "x * (1 / s) rounds like x / s on these tokens"
    write(root, "vllm-fp8-kv-write.reciprocal-scale", dict(**bad, **vtok), args, ["1", "first difference: token"])


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(20)
    fp8_cases(root, rng)
    nvfp4_cases(root, rng)
    extend_cases(root, np.random.default_rng(21))  # own streams: the decode cases stay as they were
    kv_write_cases(root, np.random.default_rng(22))
