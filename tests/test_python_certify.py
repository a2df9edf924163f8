"""tests/test_python_certify.py: the README's `import lowp` example on numpy arrays (a paged FP8
decode in vLLM's layout), and that the certificate fails a kernel that ignores v_scale and
names it; an extend batch (qo_indptr) certified row by row, its causal off-by-one named. The
kernel under test is a plain numpy fp32 decode written here. Exit 77 (skip)
without numpy; argv[1] is the source tree (python/ holds the package), LOWP_LIBRARY the
library of this build."""
import sys

try:
    import numpy as np
except ImportError:
    print("test_python_certify: numpy missing, skipped")
    sys.exit(77)
sys.path.insert(0, sys.argv[1] + "/python")
import lowp  # noqa: E402


def e4m3_values():
    """The 256 OCP E4M3 values (NaN at 0x7F / 0xFF), from the format's definition."""
    c = np.arange(256)
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    val = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    val = np.where((e == 15) & (m == 7), np.nan, val)
    return np.where(s == 1, -val, val).astype(np.float32)


def my_kernel(q, kc, vc, ks, vs, bt, sl, apply_v_scale=True):
    """A decode kernel in numpy fp32: gather the blocks, softmax(q K^T / sqrt(D)) V."""
    lut = e4m3_values()
    bs, G = kc.shape[1], q.shape[1] // kc.shape[2]
    out = np.empty(q.shape, np.float32)
    for b, n in enumerate(sl):
        pages = bt[b, : (n + bs - 1) // bs]
        K = lut[kc[pages].reshape(-1, kc.shape[2], kc.shape[3])[:n]] * np.float32(ks)
        V = lut[vc[pages].reshape(-1, vc.shape[2], vc.shape[3])[:n]]
        for h in range(q.shape[1]):
            s = K[:, h // G] @ q[b, h] * np.float32(1 / np.sqrt(q.shape[2]))
            p = np.exp(s - s.max())
            out[b, h] = (p @ V[:, h // G]) / p.sum() * np.float32(vs if apply_v_scale else 1)
    return out


# ---- the README example (numpy arrays; torch tensors are passed the same way) ----
rng = np.random.default_rng(0)
B, H, Hq, D, bs, nb = 2, 2, 8, 64, 16, 6                     # batch, KV/query heads, head dim, block size, blocks
ks, vs = 0.02, 0.01                                            # vLLM's per-tensor k_scale, v_scale
kc, _ = lowp.quantize(rng.normal(size=(nb, bs, H, D)), "fp8_e4m3", ks)  # uint8 [num_blocks, block_size, H, D]
vc, _ = lowp.quantize(rng.normal(size=(nb, bs, H, D)), "fp8_e4m3", vs)
bt = np.array([[4, 1, 0], [2, 5, 3]], np.int32)                # block_table
sl = np.array([40, 33], np.int32)                              # seq_lens
q = rng.normal(size=(B, Hq, D)).astype(np.float32)
out = my_kernel(q, kc, vc, ks, vs, bt, sl)                     # the kernel under test
cert = lowp.certify("vllm-fp8", kc, vc, k_scale=ks, v_scale=vs, block_table=bt, seq_lens=sl,
                    query=q, output=out, p_dtype="f32", out_dtype="f32")
print(cert)
# ---- end of the example ----
assert cert.ok, cert
assert cert.outputs == B * Hq * D and cert.counts["exact"] + cert.counts["within"] == cert.outputs
assert np.all(np.abs(out - cert.exact) <= cert.bound), "per-output arrays disagree with the counts"
try:  # the same example from torch tensors (CI has no torch; tools/certify_h200.py's torch-vllm-fp8 on the GPU)
    import torch
except ImportError:
    torch = None
    print("test_python_certify: torch not installed; the example from torch tensors not run")
if torch is not None:
    tc = lowp.certify("vllm-fp8", torch.from_numpy(kc), torch.from_numpy(vc), k_scale=ks, v_scale=vs,
                      block_table=torch.from_numpy(bt), seq_lens=torch.from_numpy(sl), query=torch.from_numpy(q),
                      output=torch.from_numpy(out), p_dtype="f32", out_dtype="f32")
    assert tc.counts == cert.counts and np.array_equal(tc.exact, cert.exact), (tc, cert)
    print("test_python_certify: the example from torch %s tensors: %r" % (torch.__version__, tc))

bad = my_kernel(q, kc, vc, ks, vs, bt, sl, apply_v_scale=False)
cert = lowp.certify("vllm-fp8", kc, vc, k_scale=ks, v_scale=vs, block_table=bt, seq_lens=sl,
                    query=q, output=bad, p_dtype="f32", out_dtype="f32")
print(cert)
assert not cert.ok and "ignore v_scale" in cert.diagnosis, cert
assert cert.worst[0]["verdict"] == "outside"

try:
    lowp.certify("vllm-fp8", kc, vc, k_scale=0.0, v_scale=vs, block_table=bt, seq_lens=sl, query=q, output=out)
    raise AssertionError("k_scale 0 was accepted")
except ValueError as e:
    assert "k_scale 0 must be finite and > 0" in str(e), e
# ---- extend / prefill: qo_indptr, each query row a decode over its causal prefix ----
qo = np.array([0, 3, 5], np.int32)                             # 3 queries of sequence 0, 2 of sequence 1
qx = rng.normal(size=(5, Hq, D)).astype(np.float32)
rows = [(b, int(sl[b]) - (qo[b + 1] - qo[b]) + i) for b in range(B) for i in range(qo[b + 1] - qo[b])]
ext = np.concatenate([my_kernel(qx[t:t + 1], kc, vc, ks, vs, bt[b:b + 1], [pos + 1]) for t, (b, pos) in
                      enumerate(rows)])
cert = lowp.certify("vllm-fp8", kc, vc, k_scale=ks, v_scale=vs, block_table=bt, seq_lens=sl, query=qx,
                    output=ext, p_dtype="f32", out_dtype="f32", qo_indptr=qo)
print(cert)
assert cert.ok and cert.outputs == 5 * Hq * D, cert
late = np.concatenate([my_kernel(qx[t:t + 1], kc, vc, ks, vs, bt[b:b + 1], [min(pos + 2, int(sl[b]))])
                       for t, (b, pos) in enumerate(rows)])   # a causal off-by-one
cert = lowp.certify("vllm-fp8", kc, vc, k_scale=ks, v_scale=vs, block_table=bt, seq_lens=sl, query=qx,
                    output=late, p_dtype="f32", out_dtype="f32", qo_indptr=qo)
assert not cert.ok and "causal mask off by one" in cert.diagnosis, cert
w = cert.worst[0]
assert rows[w["row"]] == (w["batch"], w["q_pos"]), w
for bad_qo, words in (([0, 3, 4], "query shape (5, 8, 64), expected [4, num_q_heads"), ([0, 3], "qo_indptr must be [batch + 1]"),
                      ([0, 6, 5], "qo_indptr decreases")):
    try:
        lowp.certify("vllm-fp8", kc, vc, k_scale=ks, v_scale=vs, block_table=bt, seq_lens=sl, query=qx,
                     output=ext, qo_indptr=np.array(bad_qo, np.int32))
        raise AssertionError("qo_indptr %s was accepted" % bad_qo)
    except ValueError as e:
        assert words in str(e), e
print("test_python_certify: ok")
