#!/bin/sh
# tests/test_shapes.sh LOWP PYTHON: every tensor-taking command over a grid of users' shapes.
#
# Commands: attn, gpu attn --emulate, attn / gpu attn --emulate --path extend|prefill,
# quantize, dequantize, stats, calibrate, select.
# Shapes, as users' models have them:
#   head dims Dq, Dv   64 96 128 192 256 512 (QK dim and VO dim drawn separately, so most
#                      rows have Dq != Dv)
#   KV heads H         1 2 3 8 12 20
#   group ratio G      1 2 3 5 7 8 16 (query heads per KV head; non powers of two)
#   context ctx        1 15 16 17 2000 (one token, a page boundary either side, a few
#                      thousand)
#   page size          1 16
#   KV format          bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 mxfp8
# The rows are a pairwise cover (every value of each factor meets every value of every
# other factor in at least one row), built greedily from a fixed seed, not the full product
# (6 x 6 x 6 x 7 x 5 x 2 x 6 = 90720 rows). Rows are bounded in cost so that the whole test
# runs in about two minutes under ASan/UBSan on 2 cores: ctx * H * G * (Dq + Dv) and
# ctx * H * max(Dq, Dv) at most what ctx 2000 x 20 KV heads x dim 64 costs (so that pair is
# in); the pairs this excludes (ctx 2000 with dim 512 and 20 heads together is a triple, not
# a pair) are listed when the grid is made.
#
# Every run must exit 0 with sane output or 2 with exactly one "lowp: " line on stderr and
# no output file (nor a temporary left behind); any other status (a crash, a sanitizer
# report) fails. Where the documented limits say a shape is valid, exit 0 is required:
# `gpu attn` takes head dims that are multiples of 64 up to 512, G <= 16 and the formats
# bf16 fp8_e4m3 fp8_e5m2 nvfp4 mxfp4 (anything else must be refused with exit 2); `attn`,
# `stats`, `calibrate` take every row; `quantize` along the last axis takes every row,
# along axis 0 it needs ctx to be a multiple of the block size unless --pad.
# Sane output:
#   attn / gpu attn  [1, H * G, Dv], finite, each output within the hull of V's values
#                    (|o| <= 2 max|v|: attention weights are a convex combination and the
#                    quantized V stays within a factor 2 of V's amax), and the two
#                    commands' outputs agree (cosine >= 0.9 where both ran and |o| is not
#                    tiny: they quantize BF16-rounded vs binary32 K/V);
#   quantize + dequantize  the input's shape back, finite, relative L2 error <= 0.5;
#   stats / calibrate      a table naming the input's shape on stdout;
#   --path extend|prefill  (SGLang's paths 2 and 1 on a chunk of the row's last q_len
#                          positions: q_len 1..9, fewer where the row is costly; extend
#                          over an NVFP4 cache, the only format that path reads) attn exits
#                          0 with [q_len, H * G, Dv] finite; gpu attn --emulate exits 0
#                          where the extend kernel takes the shape (dims multiples of 64 up
#                          to 256, G <= 16), else 2, and holds every output to its derived
#                          bound around attn's ("0 outside the bound");
#   select                 (MoBA and NSA over the row's keys in its format, blocks of 16;
#                          QSA and DSA at their fixed index dim 128 with the row's context;
#                          all with the sparse attention over the selected tokens) int32
#                          [1, units, K] indices: distinct candidates, -1 only past the
#                          count, MoBA's and NSA's forced current block present; exit 0
#                          except QSA below 4 tokens (no complete block: exit 2).
# Inputs are written by numpy (PYTHON); exit 77 (skip) when numpy is missing.
. "$(dirname "$0")/lib/cli_test.sh"
cli_test_start test_shapes "$1"
cli_test_need_numpy "${2:-python3}"
# A sanitizer report must end the run with a failing status.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:exitcode=86}
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1:exitcode=87}
export ASAN_OPTIONS UBSAN_OPTIONS

cat > "$tmp/shapes.py" <<'EOF'
import concurrent.futures, itertools, os, random, shutil, subprocess, sys, threading, time
import numpy as np

lowp, tmp = sys.argv[1], sys.argv[2]
FACTORS = [
    ("Dq", [64, 96, 128, 192, 256, 512]),
    ("Dv", [64, 96, 128, 192, 256, 512]),
    ("H", [1, 2, 3, 8, 12, 20]),
    ("G", [1, 2, 3, 5, 7, 8, 16]),
    ("ctx", [1, 15, 16, 17, 2000]),
    ("page", [1, 16]),
    ("fmt", ["bf16", "fp8_e4m3", "fp8_e5m2", "nvfp4", "mxfp4", "mxfp8"]),
]
NAMES = [n for n, _ in FACTORS]
GPU_FORMATS = {"bf16", "fp8_e4m3", "fp8_e5m2", "nvfp4", "mxfp4"}
BLOCK = {"bf16": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "nvfp4": 16, "mxfp4": 32, "mxfp8": 32}


def cost_ok(r):
    return (r["ctx"] * r["H"] * r["G"] * (r["Dq"] + r["Dv"]) <= 2000 * 20 * 128 and
            r["ctx"] * r["H"] * max(r["Dq"], r["Dv"]) <= 2000 * 20 * 64)


def pairwise(seed=0x6C6F7770, tries=60):
    """Greedy pairwise cover under cost_ok: each new row is the best of `tries` random
    completions of an uncovered pair, scored by how many uncovered pairs it covers."""
    rnd = random.Random(seed)
    pairs = set()
    for (i, (a, av)), (j, (b, bv)) in itertools.combinations(enumerate(FACTORS), 2):
        for x in av:
            for y in bv:
                pairs.add((i, x, j, y))
    # pairs no row within the cost bound can hold: the cost grows with every numeric
    # factor, so a pair is feasible iff it is with the other factors at their smallest
    def smallest(i, x, j, y):
        vals = [min(v) if isinstance(v[0], int) else v[0] for _, v in FACTORS]
        vals[i], vals[j] = x, y
        return vals
    infeasible = {p for p in pairs if not cost_ok(dict(zip(NAMES, smallest(*p))))}
    todo = pairs - infeasible
    rows = []
    while todo:
        i, x, j, y = min(todo)
        best, best_n = None, -1
        for _ in range(tries):
            vals = [rnd.choice(v) for _, v in FACTORS]
            vals[i], vals[j] = x, y
            # cheap values first when the draw is over the bound
            k = 0
            while not cost_ok(dict(zip(NAMES, vals))) and k < 50:
                f = rnd.choice([f for f in range(len(FACTORS)) if f not in (i, j)])
                vals[f] = FACTORS[f][1][0] if f != 4 else FACTORS[f][1][rnd.randrange(4)]
                k += 1
            if not cost_ok(dict(zip(NAMES, vals))):
                continue
            n = sum((a, vals[a], b, vals[b]) in todo
                    for a, b in itertools.combinations(range(len(FACTORS)), 2))
            if n > best_n:
                best, best_n = vals, n
        if best is None:  # the pair with everything else at its smallest is feasible
            best = smallest(i, x, j, y)
        for a, b in itertools.combinations(range(len(FACTORS)), 2):
            todo.discard((a, best[a], b, best[b]))
        rows.append(dict(zip(NAMES, best)))
    return rows, sorted(infeasible)


rows, infeasible = pairwise()
print(f"test_shapes: {len(rows)} rows (pairwise cover); pairs beyond the cost bound: " +
      (", ".join(f"{NAMES[i]}={x}/{NAMES[j]}={y}" for i, x, j, y in infeasible) or "none"))
sys.stdout.flush()

fails = 0
runs = 0
spent = {}
lock = threading.Lock()


def bad(msg):
    global fails
    with lock:
        fails += 1
        print("FAIL: " + msg)
        sys.stdout.flush()


def subcover(names):
    """The rows (indices) that, taken in order, first cover each pair of the factors in
    names: the commands that depend only on those factors run on these rows only."""
    idx = [NAMES.index(n) for n in names]
    seen, keep = set(), set()
    for n, r in enumerate(rows):
        vals = [r[NAMES[i]] for i in idx]
        new = {(a, vals[a], b, vals[b]) for a, b in itertools.combinations(range(len(idx)), 2)}
        if new - seen:
            keep.add(n)
            seen |= new
    return keep


STATS_ROWS = subcover(["Dq", "H", "ctx"])           # stats: the tensor's shape only
QUANT_ROWS = subcover(["Dq", "H", "ctx", "fmt"])    # quantize, dequantize, calibrate
SELECT_ROWS = subcover(["Dq", "H", "G", "ctx", "fmt"])  # select moba / nsa (keys of dim Dq)
INDEX_ROWS = subcover(["ctx", "fmt"])               # select qsa / dsa: fixed index dims
PATH_ROWS = subcover(["Dq", "Dv", "H", "G", "ctx", "page"])  # --path extend / prefill
print(f"test_shapes: quantize/dequantize/calibrate on {len(QUANT_ROWS)} rows, stats on "
      f"{len(STATS_ROWS)}, select moba/nsa on {len(SELECT_ROWS)}, qsa/dsa on {len(INDEX_ROWS)}, "
      f"--path extend/prefill on {len(PATH_ROWS)} (pairwise over their factors)")
# select's index-key formats for the row's main format (QSA and DSA have their own)
QSA_KEYS = {"bf16": "bf16", "fp8_e4m3": "e4m3", "fp8_e5m2": "e4m3", "nvfp4": "nvfp4", "mxfp4": "mxfp4",
            "mxfp8": "mxfp8"}
DSA_KEYS = {"bf16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "nvfp4": "fp4", "mxfp4": "fp4-deepgemm",
            "mxfp8": "fp8"}


def check_indices(tag, path, units, K, cand, forced):
    """[1, units, K] int32 selections: distinct candidates, -1 only past the count, each
    holding the forced candidate (the current block) where there is one"""
    o = np.load(path)
    if o.shape != (1, units, K) or o.dtype != np.int32:
        bad(f"{tag}: indices {o.dtype} {o.shape}, expected int32 (1, {units}, {K})")
        return
    for u in range(units):
        row = o[0, u]
        valid = row[row >= 0]
        if (len(valid) and valid.max() >= cand) or len(set(valid.tolist())) != len(valid) or \
                (row[len(valid):] != -1).any() or (forced is not None and forced not in valid):
            bad(f"{tag}: unit {u}: selection {row.tolist()[:8]} over {cand} candidates (forced {forced})")
            return


def select_row(tag, d, rng, Dq, H, G, ctx, fmt, qp, kp, index):
    """lowp select over the row's main keys (MoBA, NSA: blocks of 16) and, at their fixed
    index geometry, QSA (4 heads x 128, ratio 4) and DSA (G heads x 128) with the row's
    context; each with the sparse attention over the selected tokens (--v)"""
    vp, ip = os.path.join(d, "vs.npy"), os.path.join(d, "idx.npy")
    np.save(vp, rng.standard_normal((ctx, H, Dq)).astype(np.float32))
    cand = (ctx - 1) // 16 + 1
    for sel, K, units in (("moba", min(3, cand), H * G), ("nsa", min(4, cand), H)):
        t = f"{tag} select {sel}"
        res = run(t, ["select", "--selector", sel, "--q", qp, "--k", kp, "--v", vp, "--keys", fmt, "--block",
                      "16", "--topk", str(K), "--indices", ip], ip, expect=0, d=d)
        if res and res[0] == 0:
            check_indices(t, ip, units, K, cand, (ctx - 1) // 16)
            if "attention output error" not in res[1]:
                bad(f"{t}: no attention line in {res[1][-300:]!r}")
    if not index:
        return
    qi, ki, vi = (os.path.join(d, s + "_idx.npy") for s in "qkv")
    np.save(ki, rng.standard_normal((ctx, 1, 128)).astype(np.float32))
    np.save(vi, rng.standard_normal((ctx, 1, 128)).astype(np.float32))
    for sel, heads, keys, K, cand in (("qsa", 4, QSA_KEYS[fmt], max(1, min(16, ctx // 4)), ctx // 4),
                                      ("dsa", G, DSA_KEYS[fmt], min(16, ctx), ctx)):
        np.save(qi, rng.standard_normal((1, heads, 128)).astype(np.float32))
        t = f"{tag} select {sel} --keys {keys}"
        res = run(t, ["select", "--selector", sel, "--q", qi, "--k", ki, "--v", vi, "--keys", keys, "--topk",
                      str(K), "--indices", ip], ip, expect=0 if K <= cand else 2, d=d)
        if res and res[0] == 0:
            check_indices(t, ip, 1, K, cand, None)


def path_row(tag, d, rng, Dq, Dv, H, G, ctx, page, kp, vp):
    """attn --path extend|prefill and gpu attn --path ... --emulate --check-against on a
    chunk of the last q_len positions (cost: q_len x the decode's)"""
    qlen = max(1, min(ctx, 9, (2000 * 20 * 128) // (ctx * H * G * (Dq + Dv))))
    qp = os.path.join(d, "qc.npy")
    np.save(qp, rng.standard_normal((qlen, H * G, Dq)).astype(np.float32))
    kernel_ok = all(x % 64 == 0 and x <= 256 for x in (Dq, Dv)) and G <= 16
    for path in ("extend", "prefill"):
        t = f"{tag} --path {path} q_len={qlen}"
        io = ["--q", qp, "--k", kp, "--v", vp, "--kv-format", "nvfp4", "--path", path]
        a, e = os.path.join(d, "a_path.npy"), os.path.join(d, "e_path.npy")
        res = run(t + " attn", ["attn"] + io + ["--page-size", str(page), "--out", a], a, expect=0, d=d)
        if not res or res[0] != 0 or load(a, (qlen, H * G, Dv), t + " attn") is None:
            continue
        res = run(t + " gpu attn --emulate", ["gpu", "attn", "--emulate"] + io +
                  ["--out", e, "--check-against", a], e, expect=0 if kernel_ok else 2, d=d)
        if res and res[0] == 0:
            load(e, (qlen, H * G, Dv), t + " gpu attn --emulate")
            if " 0 outside the bound" not in res[1]:
                bad(f"{t} gpu attn --emulate: not '0 outside the bound': {res[1][-300:]!r}")


def run(tag, args, out, expect=None, d=None):
    """Run lowp ARGS; out is the output file (or None), d the row's folder. Returns (exit
    status, stdout), or None after a failure was reported."""
    global runs
    with lock:
        runs += 1
    if out and os.path.exists(out):
        os.remove(out)
    t = time.time()
    p = subprocess.run([lowp] + args, capture_output=True, text=True, errors="replace")
    key = args[0] if args[0] != "gpu" else "gpu attn"
    if "--path" in args:
        key += " --path " + args[args.index("--path") + 1]
    with lock:
        spent[key] = spent.get(key, 0.0) + time.time() - t
    if time.time() - t > float(os.environ.get("LOWP_SHAPES_SLOW", "inf")):
        print(f"slow: {tag}: {time.time() - t:.1f} s")
    err = p.stderr.strip().splitlines()
    if p.returncode not in (0, 2):
        bad(f"{tag}: exit {p.returncode}: {' | '.join(err[:6])[:1500]}")
        return None
    if expect is not None and p.returncode != expect:
        bad(f"{tag}: exit {p.returncode}, expected {expect}: {' | '.join(err[:3])[:500]}")
        return None
    if p.returncode == 2:
        if len(err) != 1 or not err[0].startswith("lowp: "):
            bad(f"{tag}: exit 2 without exactly one 'lowp: ' line: {err[:4]}")
            return None
        if out and os.path.exists(out):
            bad(f"{tag}: exit 2 but {out} was written")
            return None
    elif out and not os.path.exists(out):
        bad(f"{tag}: exit 0 but no {out}")
        return None
    left = [f for f in os.listdir(d) if ".tmp" in f]
    if left:
        bad(f"{tag}: temporaries left: {left}")
        for f in left:
            os.remove(os.path.join(d, f))
    return p.returncode, p.stdout


def load(path, shape, tag):
    o = np.load(path)
    if o.shape != tuple(shape) or o.dtype != np.float32:
        bad(f"{tag}: output {o.dtype} {o.shape}, expected float32 {tuple(shape)}")
        return None
    if not np.all(np.isfinite(o)):
        bad(f"{tag}: output has {np.count_nonzero(~np.isfinite(o))} non-finite values")
        return None
    return o


def do_row(n, r):
    d = os.path.join(tmp, f"row{n}")
    os.mkdir(d)
    try:
        one_row(n, r, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def one_row(n, r, d):
    Dq, Dv, H, G, ctx, page, fmt = (r[k] for k in NAMES)
    tag = f"row {n} Dq={Dq} Dv={Dv} H={H} G={G} ctx={ctx} page={page} {fmt}"
    rng = np.random.default_rng(1000 + n)
    q = rng.standard_normal((1, H * G, Dq)).astype(np.float32)
    k = rng.standard_normal((ctx, H, Dq)).astype(np.float32)
    k[..., ::17] *= 20.0  # a few outlier channels, as real keys have
    v = rng.standard_normal((ctx, H, Dv)).astype(np.float32)
    qp, kp, vp = (os.path.join(d, s + ".npy") for s in "qkv")
    np.save(qp, q), np.save(kp, k), np.save(vp, v)
    vmax = float(np.abs(v).max())
    io = ["--q", qp, "--k", kp, "--v", vp, "--kv-format", fmt, "--page-size", str(page)]

    outs = {}
    o_attn = os.path.join(d, "o_attn.npy")
    res = run(tag + " attn", ["attn"] + io + ["--out", o_attn], o_attn, expect=0, d=d)
    if res and res[0] == 0:
        outs["attn"] = load(o_attn, (1, H * G, Dv), tag + " attn")
    gpu_ok = Dq % 64 == 0 and Dv % 64 == 0 and Dq <= 512 and Dv <= 512 and G <= 16 and \
        fmt in GPU_FORMATS
    o_gpu = os.path.join(d, "o_gpu.npy")
    res = run(tag + " gpu attn --emulate", ["gpu", "attn", "--emulate"] + io + ["--out", o_gpu],
              o_gpu, expect=0 if gpu_ok else 2, d=d)
    if res and res[0] == 0:
        outs["gpu"] = load(o_gpu, (1, H * G, Dv), tag + " gpu attn")
    for name, o in outs.items():
        if o is not None and np.abs(o).max() > 2.0 * vmax:
            bad(f"{tag} {name}: |output| {np.abs(o).max():.4g} beyond 2 max|v| = {2 * vmax:.4g}")
    a, g = outs.get("attn"), outs.get("gpu")
    if a is not None and g is not None and np.linalg.norm(a) > 1e-3 * vmax * np.sqrt(a.size):
        cos = float(np.dot(a.ravel(), g.ravel()) /
                    (np.linalg.norm(a) * np.linalg.norm(g) + 1e-300))
        if not cos >= 0.9:
            bad(f"{tag}: attn and gpu attn --emulate disagree (cosine {cos:.4f})")

    if n in PATH_ROWS:
        path_row(tag, d, rng, Dq, Dv, H, G, ctx, page, kp, vp)
    if n in SELECT_ROWS:
        select_row(tag, d, rng, Dq, H, G, ctx, fmt, qp, kp, n in INDEX_ROWS)
    if n not in QUANT_ROWS:
        return
    # quantize along the last axis (Dq) and along axis 0 (ctx), padded or not
    qfmt = fmt
    for axis, pad in ((-1, False), (0, ctx % 2 == 1)):
        st = os.path.join(d, "k.safetensors")
        L = Dq if axis == -1 else ctx
        want = 0 if (L % BLOCK[qfmt] == 0 or pad) else 2
        qt = f"{tag} quantize --axis {axis}{' --pad' if pad else ''}"
        res = run(qt, ["quantize", "--format", qfmt, "--axis", str(axis), "--in", kp, "--out", st] +
                  (["--pad"] if pad else []), st, expect=want, d=d)
        if not res or res[0] != 0:
            continue
        dq = os.path.join(d, "kd.npy")
        res = run(qt + " dequantize", ["dequantize", "--in", st, "--out", dq], dq, expect=0, d=d)
        if res and res[0] == 0:
            x = load(dq, k.shape, qt + " dequantize")
            if x is not None and k.size:
                rel = float(np.linalg.norm(x - k) / (np.linalg.norm(k) + 1e-300))
                if not rel <= 0.5:
                    bad(f"{qt} dequantize: relative L2 error {rel:.3g}")

    cmds = [["calibrate", "--format", fmt, "--search-max", "4096"]]
    if n in STATS_ROWS:
        cmds.append(["stats"])
    for cmd in cmds:
        res = run(f"{tag} {cmd[0]}", cmd + ["--in", kp], None, expect=0, d=d)
        if res and res[0] == 0 and f"[{ctx}, {H}, {Dq}]" not in res[1]:
            bad(f"{tag} {cmd[0]}: the table does not name the shape [{ctx}, {H}, {Dq}]")



t0 = time.time()
# two rows at a time (2 cores); each row's runs in order, in its own folder
with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
    for f in [ex.submit(do_row, n, r) for n, r in enumerate(rows)]:
        f.result()
print(f"test_shapes: {runs} runs over {len(rows)} rows, {fails} failed, {time.time() - t0:.0f} s (" +
      ", ".join(f"{k} {v:.0f} s" for k, v in sorted(spent.items())) + ")")
sys.exit(1 if fails else 0)
EOF
"$python" "$tmp/shapes.py" "$lowp" "$tmp"
