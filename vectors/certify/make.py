"""vectors/certify/make.py: the golden decode vectors of `lowp certify`, one folder per case.

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
a kernel that ignores v_scale, a NaN in the output."""
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


def pages_table(rng, npages, P=P):
    need = [(int(n) + P - 1) // P for n in SEQ]
    perm = rng.permutation(npages)[: sum(need)].astype(np.int32)
    bt = np.full((B, max(need)), -1, np.int32)
    at = 0
    for b, k in enumerate(need):
        bt[b, :k] = perm[at: at + k]
        at += k
    return bt


def kernel(q, K, V, bt, vs):
    """fp32 decode over logical K, V [pages, P, H, D] (global scales: K's inside, V's vs)."""
    P, H = K.shape[1], K.shape[2]
    G = q.shape[1] // H
    out = np.empty((B, H * G, D), np.float32)
    for b in range(B):
        n = int(SEQ[b])
        pg = bt[b, : (n + P - 1) // P]
        k = K[pg].reshape(-1, H, D)[:n].astype(np.float32)
        v = V[pg].reshape(-1, H, D)[:n].astype(np.float32)
        for h in range(H * G):
            s = k[:, h // G] @ q[b, h] * np.float32(1 / np.sqrt(D))
            p = np.exp(s - s.max())
            out[b, h] = (p @ v[:, h // G]) / p.sum() * np.float32(vs)
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


if __name__ == "__main__":
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(20)
    fp8_cases(root, rng)
    nvfp4_cases(root, rng)
