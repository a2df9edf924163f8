#!/usr/bin/env python3
"""tools/ex2_fit.py: analysis of the H200's ex2.approx.ftz.f32 from the probe's grid data
(gpu/probe/ex2_probe.cu; issue #22 item 3; findings in ref/notes/ex2-approx.md).

    python3 tools/ex2_fit.py DATADIR [--fit] [--emit-test] [--table]

DATADIR holds ex2_err_0_1.i8 and ex2_err_m1_0.i8 (int8 per k < 2^23: hardware bits minus
the bits of RN(2^x) at x = k 2^-23 and x = -1 + k 2^-23) and ex2-approx-h200.md (the
probe's report). The hardware values are recovered as bits(RN(2^x)) + err, RN(2^x) by
binary64 exp2 rounded to binary32: the probe counted 0 references within 4 binary64 ulps
of a binary32 midpoint on both grids, so that rounding is the correct one (numpy's exp2 is
within 1 binary64 ulp).

Prints (always):
  - the error histograms (they must equal the report's; a check that the data was read);
  - the negative-input rule: how many k in 1 .. 2^23 - 1 have
    hw(-1 + k 2^-23) == hw(k' 2^-23) / 2, for k' = k - 1 (ones' complement of the
    fraction) and k' = k (two's complement);
--fit (slow, minutes): how close a smooth model of g(k) (the mantissa at k 2^-23) gets:
  - per segment of 2^(23-m) points, a least-squares polynomial of degree 2 / 3, floored,
    with the best constant shift: mismatches over the 2^23 points;
  - the bias of g over RN and its jumps at segment boundaries; per bit of the low part
    x_l, how much a set bit lowers the hardware's value against a smooth fit;
  - with scipy (optional): the minimax deviation s of the best quadratic from the
    measured mantissa + 1/2 on some segments (and, on two, of a quadratic plus one offset
    per bit of x_l); floor(p) can reproduce a segment only when s <= 1/2;
--emit-test: the C tables of tests/test_ex2_approx.c (g samples and (x, hardware) pairs).
--table: the model's baseline (ref/hw/src/ex2_approx.c): fits the integer baseline per 64
  segments of 2^17 indices (least squares on g + 1/2, then the constant term that leaves
  the fewest corrections), checks that every correction is -1, 0 or +1, and writes
  ref/hw/src/ex2_baseline.h (the coefficients). The corrections file is not written here:
  gpu/probe/ex2_probe.cu, built with that header, measures g, encodes the corrections
  against lowp_ex2_baseline with the library's encoder (lowp/corr_table.h, magic
  LOWPEX2T) into OUTDIR/ex2_approx_sm90.bin, and compares it with the embedded
  ref/hw/data/ex2_approx_sm90.bin byte for byte; after a new baseline, that output is the
  file to commit (one implementation of the encoder).
Exit 2 on a missing or short file (one line)."""
import re
import sys

import numpy as np

N = 1 << 23


def die(msg):
    print("ex2_fit.py: " + msg, file=sys.stderr)
    sys.exit(2)


def load(d):
    k = np.arange(N, dtype=np.int64)
    out = []
    for name, x0 in (("ex2_err_0_1.i8", 0.0), ("ex2_err_m1_0.i8", -1.0)):
        try:
            e = np.fromfile(d + "/" + name, dtype=np.int8).astype(np.int64)
        except OSError as ex:
            die("cannot read %s/%s: %s" % (d, name, ex.strerror))
        if e.size != N:
            die("%s/%s: %d bytes, want %d" % (d, name, e.size, N))
        x = x0 + k * 2.0**-23  # exact in binary64 and in binary32
        rn = np.exp2(x).astype(np.float32).view(np.uint32).astype(np.int64)
        out.append((rn + e, e))
    return out


def report_points(d):
    """(x, hardware) pairs the report lists: its first mismatches and named inputs."""
    try:
        t = open(d + "/ex2-approx-h200.md").read()
    except OSError as ex:
        die("cannot read %s/ex2-approx-h200.md: %s" % (d, ex.strerror))
    pts = [(int(a, 16), int(b, 16)) for a, b in
           re.findall(r"^- x = 0x([0-9a-f]{8}) \([^)]*\): 0x([0-9a-f]{8})", t, re.M)]
    pts += [(int(a, 16), int(b, 16)) for a, b in
            re.findall(r"^\| [^|]+ \| 0x([0-9a-f]{8}) \| 0x([0-9a-f]{8}) \|", t, re.M)]
    return pts


def split_index(x):
    """The index k the model (ref/hw/include/lowp/ex2_approx.h) reads g at, or None; used
    only to choose which g samples the test needs, the test checks the C model itself."""
    neg, be, m = x >> 31, (x >> 23) & 0xFF, x & 0x7FFFFF
    if be >= 134:
        return None
    sig = (m | 0x800000) if be else 0
    sh = be - 127
    a = sig << sh if sh >= 0 else (sig >> -sh if sh > -24 else 0)
    f = a & (N - 1)
    return f if not neg else (0 if f == 0 else N - 1 - f)


def segments_and_bits(mp):
    """The smooth upward bias of g and its jumps (segment boundaries), then the per-bit
    regression of section 2 of ref/notes/ex2-approx.md."""
    F = np.arange(N)
    y = (np.exp2(F / 2.0**23) - 1) * 2.0**23  # exact mantissa in ulps (binary64)
    W = 1024
    lo = (mp - y).reshape(-1, W).max(1)  # floor model: M - y <= bias < M + 1 - y
    hi = (mp + 1 - y).reshape(-1, W).min(1)
    d = np.abs(np.diff((lo + hi) / 2))  # d[j - 1]: change from window j - 1 to j
    print("bias change between adjacent 1024-point windows: median %.4f, 99%% %.4f" %
          (np.median(d), np.quantile(d, 0.99)))
    for sh in (18, 17, 16, 15):
        js = np.arange(1 << sh, N, 1 << sh)
        if sh < 18:
            js = js[js % (1 << (sh + 1)) != 0]
        v = d[js // W - 1]
        print("  across the %d odd multiples of 2^%d: median %.4f, min %.4f" %
              (len(js), sh, np.median(v), v.min()))
    m = 6
    S = 1 << (23 - m)
    U = np.empty(N)
    for i in range(1 << m):
        s = slice(i * S, (i + 1) * S)
        t = (F[s] - i * S) / S
        r = mp[s] + 0.5 - y[s]
        U[s] = y[s] + np.polyval(np.polyfit(t, r, 4), t) - mp[s]
    xl = F & (S - 1)
    print("per bit of x_l (64 segments): mean position of a smooth fit in the hardware's "
          "ulp, bit set minus bit clear: " +
          ", ".join("%d: %.4f" % (j, U[((xl >> j) & 1) == 1].mean() - U[((xl >> j) & 1) == 0].mean())
                    for j in range(23 - m)))


def fit(mp):
    segments_and_bits(mp)
    F = np.arange(N)
    for m in (6, 7, 8, 10):
        W = 1 << (23 - m)
        tot2 = tot3 = 0
        for i in range(1 << m):
            s = slice(i * W, (i + 1) * W)
            t = (F[s] - i * W) / W
            v = mp[s] + 0.5
            for deg in (2, 3):
                p = np.polyval(np.polyfit(t, v, deg), t)
                best = min(int(np.sum(np.floor(p + dd) != mp[s]))
                           for dd in np.linspace(-0.1, 0.1, 41))
                if deg == 2:
                    tot2 += best
                else:
                    tot3 += best
        print("segments 2^%d: least-squares + shift, floored: %d mismatches (degree 2), "
              "%d (degree 3), of %d" % (m, tot2, tot3, N), flush=True)
    try:
        from scipy.optimize import linprog
    except ImportError:
        print("minimax: scipy not installed, skipped")
        return
    def minimax(cols, v):
        A = np.vstack(cols).T
        n, d = A.shape
        Aub = np.vstack([np.hstack([A, -np.ones((n, 1))]), np.hstack([-A, -np.ones((n, 1))])])
        r = linprog(np.r_[np.zeros(d), 1], A_ub=Aub, b_ub=np.r_[v, -v],
                    bounds=[(None, None)] * (d + 1), method="highs")
        return r.x[-1] if r.x is not None else float("nan")

    for m in (6, 7, 10, 13):
        W = 1 << (23 - m)
        for i in (0, 1, 5, (1 << m) // 2, (1 << m) - 2):
            Fs = np.arange(i * W, (i + 1) * W)
            xl = Fs - i * W
            t = xl / W
            v = mp[Fs] + 0.5
            line = "minimax quadratic, segment %d of 2^%d (%d points): s = %.4f" % (
                i, m, W, minimax([t**0, t, t * t], v))
            if m == 6 and i in (0, 5):  # plus a free offset per bit of x_l
                bits = [((xl >> j) & 1).astype(float) for j in range(23 - m)]
                line += "; with one offset per bit of x_l: s = %.4f" % minimax(
                    [t**0, t, t * t] + bits, v)
            print(line, flush=True)


def emit_test(hp, hn, pts):
    rng = np.random.default_rng(20261202)
    ks = set(int(v) for v in rng.integers(0, N, 160))
    ks |= {0, 1, 2, 3, N // 2, N - 2, N - 1}
    ep = hp - np.exp2(np.arange(N) * 2.0**-23).astype(np.float32).view(np.uint32)
    for want in (-1, 1):  # some of each error sign
        idx = np.nonzero(ep == want)[0]
        ks |= set(int(v) for v in idx[:: max(1, len(idx) // 20)][:20])
    pairs = []
    for k in sorted(ks):
        pairs.append((int(np.float32(k * 2.0**-23).view(np.uint32)), int(hp[k])))
        if k + 1 < N:  # x = -1 + (k + 1) 2^-23 reads g at k (the ones' complement)
            x = np.float32(-1.0 + (k + 1) * 2.0**-23).view(np.uint32)
            pairs.append((int(x), int(hn[k + 1])))
    pairs.append((0xBF800000, int(hn[0])))  # x = -1
    for x, y in pts:
        k = split_index(x)
        if k is not None:
            ks.add(k)
        pairs.append((x, y))
    print("/* generated by tools/ex2_fit.py --emit-test from the H200 data */")
    print("static const uint32_t ex2_g_sample[][2] = { /* k, hardware bits of ex2(k 2^-23) */")
    for k in sorted(ks):
        print("    {0x%06xu, 0x%08xu}," % (k, int(hp[k])))
    print("};")
    print("static const uint32_t ex2_hw_pair[][2] = { /* x, hardware bits of ex2(x) */")
    seen = set()
    for x, y in pairs:
        if x not in seen:
            seen.add(x)
            print("    {0x%08xu, 0x%08xu}," % (x, y))
    print("};")


SEG_BITS = 17  # 64 segments of 2^17 indices
BASE_SHIFT = 38  # base(k) = (c0 + c1 t + c2 t^2) >> 38, t = k mod 2^17, in int64


def table(mp):
    L = 1 << SEG_BITS
    t = np.arange(L, dtype=np.int64)
    coefs, entries = [], []
    for j in range(N >> SEG_BITS):
        gs = mp[j * L:(j + 1) * L].astype(np.int64)
        c2f, c1f, c0f = np.polyfit(t.astype(np.float64), gs + 0.5, 2)
        c2 = int(round(c2f * 2.0**BASE_SHIFT))
        c1 = int(round(c1f * 2.0**BASE_SHIFT))
        rest = c1 * t + c2 * t * t
        best = None
        for d in np.linspace(-0.6, 0.6, 97):
            c0 = int(round(c0f * 2.0**BASE_SHIFT + d * 2.0**BASE_SHIFT))
            r = gs - ((c0 + rest) >> BASE_SHIFT)
            if np.abs(r).max() > 1:
                continue
            m = int(np.count_nonzero(r))
            if best is None or m < best[0]:
                best = (m, c0)
        if best is None:
            die("segment %d: no constant term keeps every correction within +-1" % j)
        c0 = best[1]
        if min(c0, c1, c2) < 0 or c0 + c1 * (L - 1) + c2 * (L - 1)**2 >= 2**62:
            die("segment %d: coefficients outside the int64 range the C code assumes" % j)
        r = gs - ((c0 + rest) >> BASE_SHIFT)
        for i in np.nonzero(r)[0]:
            entries.append((j * L + int(i), int(r[i])))
        coefs.append((c0, c1, c2))
    with open("ref/hw/src/ex2_baseline.h", "w") as f:
        f.write("/* ref/hw/src/ex2_baseline.h: generated by tools/ex2_fit.py --table from the sm_90\n"
                " * measurement of ex2.approx.ftz.f32 (gpu/probe/ex2_probe.cu); do not edit.\n"
                " * Segment j = k >> %d of the index k: base(k) = (c0 + c1 t + c2 t^2) >> %d with\n"
                " * t = k & 0x%X, in int64 (every term >= 0, the sum < 2^62). %d corrections\n"
                " * (ref/hw/data/ex2_approx_sm90.bin) bring it to the hardware's mantissa. */\n"
                % (SEG_BITS, BASE_SHIFT, L - 1, len(entries)))
        f.write("#define LOWP_EX2_SEG_BITS %d\n#define LOWP_EX2_BASE_SHIFT %d\n" % (SEG_BITS, BASE_SHIFT))
        f.write("static const int64_t lowp_ex2_base[%d][3] = {\n" % len(coefs))
        for c in coefs:
            f.write("    {INT64_C(%d), INT64_C(%d), INT64_C(%d)},\n" % c)
        f.write("};\n")
    ups = sum(1 for e in entries if e[1] > 0)
    print("table: baseline written; %d corrections (+1 %d, -1 %d) for the probe to encode" %
          (len(entries), ups, len(entries) - ups))


def main():
    args = sys.argv[1:]
    opts = [a for a in args if a.startswith("--")]
    pos = [a for a in args if not a.startswith("--")]
    if len(pos) != 1 or any(o not in ("--fit", "--emit-test", "--table") for o in opts):
        die("usage: ex2_fit.py DATADIR [--fit] [--emit-test] [--table]")
    (hp, ep), (hn, en) = load(pos[0])
    pts = report_points(pos[0])
    if "--emit-test" in opts:
        emit_test(hp, hn, pts)
        return
    for name, e in (("[0, 1)", ep), ("[-1, 0)", en)):
        v, c = np.unique(e, return_counts=True)
        print("error histogram %s: %s" % (name, ", ".join("%d: %d" % t for t in zip(v, c))))
    mp = hp - 0x3F800000
    mn = hn - 0x3F000000
    if mp.min() < 0 or mp.max() >= N or mn.min() < 0 or mn.max() >= N:
        die("a grid value is outside its binade")
    print("negative grid, k = 1 .. 2^23-1: hw(-1 + k 2^-23) != hw((k-1) 2^-23)/2 at %d; "
          "!= hw(k 2^-23)/2 at %d; hw(-1) = 0x%08x" %
          (int(np.sum(mn[1:] != mp[:-1])), int(np.sum(mn[1:] != mp[1:])), int(hn[0])))
    print("RN(2^x) != hardware on [0, 1): %d of %d" % (int(np.sum(ep != 0)), N))
    print("report points read: %d" % len(pts))
    if "--table" in opts:
        table(mp)
    if "--fit" in opts:
        fit(mp.astype(np.float64))


if __name__ == "__main__":
    main()
