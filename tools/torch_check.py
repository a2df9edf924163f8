#!/usr/bin/env python3
"""tools/torch_check.py: lowp's `torch` and `ml_dtypes` profiles against the libraries.

    python3 tools/torch_check.py --lib build/ref/liblowp.so --out torch-check.md [--quick]

Over every binary32 input (2^32 bit patterns, in chunks):

1. lowp's `torch` profile (liblowp.so through ctypes, lowp/format.h) against PyTorch's
   `tensor.to(dtype)` on CPU tensors, for float8_e4m3fn, float8_e5m2, float8_e8m0fnu,
   bfloat16 and float16. Differences are lowp failures.
2. The same casts on CUDA tensors against the CPU ones: differences between torch CPU and
   torch CUDA, reported separately and never counted as lowp failures.
3. For the record, lowp's `ml_dtypes` profile against ml_dtypes `astype` (numpy float16
   for F16; float4_e2m1fn too when ml_dtypes has it), in a pool of processes (ml_dtypes
   casts run on one core). Differences are lowp failures too.

--quick compares 14 windows of 2^22 inputs instead of all 2^32. --budget-s bounds the
run: parts not reached in time are reported with the inputs they covered.

Writes a Markdown report. Exit status: 0 every comparison made matches, 1 lowp differs
from a library, 2 bad usage or liblowp not loadable, 3 an unexpected error, 77 torch is
not installed (the ml_dtypes record is still made and written).
"""
import argparse
import ctypes
import datetime
import multiprocessing as mp
import os
import platform
import sys
import time
import warnings

import numpy as np

PROG = "torch_check"

# lowp/format.h enums
LOWP = {"e2m1": 0, "e4m3": 1, "e5m2": 2, "e8m0": 3, "bf16": 4, "f16": 5}
LOWP_BITS = {"e2m1": 4, "e4m3": 8, "e5m2": 8, "e8m0": 8, "bf16": 16, "f16": 16}
PROFILE = {"cuda": 0, "torch": 1, "ml_dtypes": 2, "ocp": 3}
LOWP_RN = 0
LOWP_SAT_DEFAULT = -1

# (lowp format, torch dtype name, ml_dtypes name or "numpy.float16")
TORCH_CASES = [
    ("e4m3", "float8_e4m3fn"),
    ("e5m2", "float8_e5m2"),
    ("e8m0", "float8_e8m0fnu"),
    ("bf16", "bfloat16"),
    ("f16", "float16"),
]
MLD_CASES = [
    ("e4m3", "float8_e4m3fn"),
    ("e5m2", "float8_e5m2"),
    ("e8m0", "float8_e8m0fnu"),
    ("bf16", "bfloat16"),
    ("f16", "numpy.float16"),
    ("e2m1", "float4_e2m1fn"),
]
# --quick: windows of 2^22 inputs: zero and the subnormals (both halves), one, the E4M3
# (384..512) and E5M2 / F16 (49152..65536) overflow bands, 2^127..FLT_MAX, Inf and NaN.
QUICK_WINDOWS = [0x00000000, 0x00400000, 0x3F800000, 0x43C00000, 0x47400000, 0x7F000000, 0x7F400000,
                 0x7F800000, 0x7FC00000, 0x80000000, 0xC3C00000, 0xC7400000, 0xFF800000, 0xFFC00000]
QUICK_LOG2 = 22
FIRST_MAX = 20


def log(msg):
    print(f"{PROG}: {msg}", flush=True)


# ---------------------------------------------------------------- lowp through ctypes

class Lowp:
    """liblowp.so: codec init and the array encoders."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)  # CDLL releases the GIL during calls
        L = self.lib
        L.lowp_codec_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        L.lowp_codec_init.restype = ctypes.c_int
        for fn in ("lowp_encode_f32_u8", "lowp_encode_f32_u16"):
            f = getattr(L, fn)
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
            f.restype = None
        self.codecs = {}

    def codec(self, fmt, profile):
        """The codec for (fmt, profile, rn, default saturation), or raise with lowp's reason."""
        key = (fmt, profile)
        if key not in self.codecs:
            buf = (ctypes.c_uint64 * 64)()  # 512 bytes, 8-aligned: larger than lowp_codec
            why = ctypes.create_string_buffer(256)
            rc = self.lib.lowp_codec_init(buf, LOWP[fmt], PROFILE[profile], LOWP_RN, LOWP_SAT_DEFAULT, why, 256)
            if rc != 0:
                raise ValueError(f"lowp refuses {fmt} {profile} rn: {why.value.decode(errors='replace')}")
            self.codecs[key] = buf
        return self.codecs[key]

    def encode(self, fmt, profile, in_ptr, out_ptr, n):
        c = self.codec(fmt, profile)
        if LOWP_BITS[fmt] <= 8:
            self.lib.lowp_encode_f32_u8(c, ctypes.c_void_p(in_ptr), ctypes.c_void_p(out_ptr), n)
        else:
            self.lib.lowp_encode_f32_u16(c, ctypes.c_void_p(in_ptr), ctypes.c_void_p(out_ptr), n)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def find_lib(arg):
    cands = [arg] if arg else []
    if os.environ.get("LOWP_LIB"):
        cands.append(os.environ["LOWP_LIB"])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for d in ("build", "build-gpu", "build-device"):
        cands.append(os.path.join(root, d, "ref", "liblowp.so"))
        cands.append(os.path.join(root, d, "liblowp.so"))
    for c in cands:
        if c and os.path.exists(c):
            return c
    return None


# ---------------------------------------------------------------- ranges

def ranges(quick, chunk_log2):
    if quick:
        return [(w, w + (1 << QUICK_LOG2)) for w in QUICK_WINDOWS]
    step = 1 << chunk_log2
    return [(lo, lo + step) for lo in range(0, 1 << 32, step)]


def split(rs, log2):
    out = []
    for lo, hi in rs:
        step = 1 << log2
        for a in range(lo, hi, step):
            out.append((a, min(hi, a + step)))
    return out


def f32_of(bits):
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


class Tally:
    """One comparison: inputs, mismatches, NaN-input mismatches, first mismatches."""

    def __init__(self, name, fmt, lib_name):
        self.name, self.fmt, self.lib_name = name, fmt, lib_name
        self.inputs = self.mism = self.nan_mism = 0
        self.first = []  # (bits, library code, other code)
        self.seconds = 0.0
        self.note = ""
        self.status = "pass"
        self.planned = 0

    def add(self, inputs, mism, nan_mism, first):
        self.inputs += inputs
        self.mism += mism
        self.nan_mism += nan_mism
        self.first = sorted(self.first + list(first))[:FIRST_MAX]

    def finish(self, failing=True):
        if self.status in ("not run", "error"):
            return
        if self.mism:
            self.status = "**MISMATCH**" if failing else "differ"
        elif self.inputs == 0 and self.planned:
            self.status = "not reached"
        elif self.inputs < self.planned:
            self.status = "partial"
        if self.inputs < self.planned:
            self.note = (self.note + "; " if self.note else "") + \
                f"covered {self.inputs} of {self.planned} inputs (time budget)"


# ---------------------------------------------------------------- ml_dtypes (process pool)

_W = {}


def _mld_dtype(name):
    if name == "numpy.float16":
        return np.float16
    import ml_dtypes
    return getattr(ml_dtypes, name)


def _mld_worker(task):
    """(lib, fmt, dtype name, lo, hi) -> (fmt, n, mismatches, NaN-input mismatches, first)."""
    lib_path, fmt, dname, lo, hi = task
    if "lowp" not in _W:
        _W["lowp"] = Lowp(lib_path)
    lw = _W["lowp"]
    n = hi - lo
    utype = np.uint8 if LOWP_BITS[fmt] <= 8 else np.uint16
    # Buffers reused across tasks (fresh pages cost more than the casts).
    if _W.get("n") != n:
        _W.clear()
        _W.update(lowp=lw, n=n, base=np.arange(n, dtype=np.uint32), bits=np.empty(n, dtype=np.uint32))
    bits = np.add(_W["base"], np.uint32(lo), out=_W["bits"])
    x = bits.view(np.float32)
    dt = _mld_dtype(dname)
    if ("ref", dname) not in _W:
        _W[("ref", dname)] = np.empty(n, dtype=dt)
        _W[("out", fmt)] = np.empty(n, dtype=utype)
    refbuf, out = _W[("ref", dname)], _W[("out", fmt)]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        np.copyto(refbuf, x, casting="unsafe")  # the same cast as x.astype(dt)
    ref = refbuf.view(utype)
    lw.encode(fmt, "ml_dtypes", x.ctypes.data, out.ctypes.data, n)
    ne = ref != out
    m = int(np.count_nonzero(ne))
    nanm, first = 0, []
    if m:
        idx = np.flatnonzero(ne)
        nanm = int(np.count_nonzero(np.isnan(x[idx])))
        first = [(int(bits[i]), int(ref[i]), int(out[i])) for i in idx[:FIRST_MAX]]
    return fmt, n, m, nanm, first


def run_mldtypes(args, lib_path, rs, deadline, tallies):
    try:
        import ml_dtypes
        version = ml_dtypes.__version__
    except Exception as e:  # noqa: BLE001
        log(f"ml_dtypes not importable ({e}): the ml_dtypes record is skipped")
        return None
    cases = []
    for fmt, dname in MLD_CASES:
        t = Tally(f"lowp ml_dtypes vs {dname}", fmt, dname)
        tallies.append(t)
        if dname != "numpy.float16" and not hasattr(ml_dtypes, dname):
            t.status, t.note = "not run", f"ml_dtypes {version} has no {dname}"
            continue
        try:
            Lowp(lib_path).codec(fmt, "ml_dtypes")
        except ValueError as e:
            t.status, t.note = "not run", str(e)
            continue
        cases.append((fmt, dname, t))
    tasks = []
    sub = split(rs, 24)
    for fmt, dname, t in cases:
        t.planned = sum(hi - lo for lo, hi in sub)
        tasks += [(lib_path, fmt, dname, lo, hi) for lo, hi in sub]
    if not tasks:
        return version
    by_fmt = {fmt: t for fmt, _, t in cases}
    workers = args.workers or os.cpu_count() or 1
    os.environ["OMP_NUM_THREADS"] = "1"  # one core per worker; inherited by the spawned pool
    t0 = time.time()
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(workers)
    timed_out = False
    try:
        for fmt, n, m, nanm, first in pool.imap_unordered(_mld_worker, tasks, chunksize=1):
            by_fmt[fmt].add(n, m, nanm, first)
            if time.time() > deadline:
                timed_out = True
                break
    finally:
        if timed_out:
            pool.terminate()
        else:
            pool.close()
        pool.join()
    el = time.time() - t0
    for fmt, dname, t in cases:
        t.seconds = el / len(cases)  # the pool interleaves formats; share the time
        t.finish()
    log(f"ml_dtypes record: {len(tasks)} tasks on {workers} processes in {el:.1f} s"
        + (" (stopped at the time budget)" if timed_out else ""))
    return version


# ---------------------------------------------------------------- torch

def _diff(torch, a, b, x, lo):
    """(mismatches, on NaN inputs, first) between code tensors a and b (same device)."""
    if torch.equal(a, b):
        return 0, 0, []
    ne = a != b
    idx = ne.nonzero().flatten()
    m = int(idx.numel())
    nanm = int(torch.isnan(x[idx]).sum())
    k = idx[:FIRST_MAX]
    first = [((lo + int(i)) & 0xFFFFFFFF, int(p) & 0xFFFF, int(q) & 0xFFFF)
             for i, p, q in zip(k.tolist(), a[k].tolist(), b[k].tolist())]
    return m, nanm, first


def run_torch(args, lw, rs, deadline, tallies, cuda_tallies, env):
    import torch
    env["torch"] = torch.__version__
    env["torch cuda"] = str(torch.version.cuda)
    nthreads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(nthreads)
    env["torch threads"] = str(torch.get_num_threads())
    try:  # the CPU kernels torch dispatched to (vectorized paths can differ on NaN)
        env["torch CPU capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001
        pass
    use_cuda = not args.no_cuda and torch.cuda.is_available()
    if use_cuda:
        env["CUDA device"] = torch.cuda.get_device_name(0)
    else:
        env["CUDA device"] = "none (torch.cuda.is_available() is False)" if not args.no_cuda else "--no-cuda"
    cuda_broken = None
    bufs = {}  # reused input and lowp output buffers (fresh pages cost more than the casts)
    for fmt, dname in TORCH_CASES:
        t = Tally(f"lowp torch vs torch CPU {dname}", fmt, dname)
        tc = Tally(f"torch CUDA vs torch CPU {dname}", fmt, dname)
        tallies.append(t)
        cuda_tallies.append(tc)
        dt = getattr(torch, dname, None)
        if dt is None:
            t.status = tc.status = "not run"
            t.note = tc.note = f"torch {torch.__version__} has no {dname}"
            continue
        try:
            lw.codec(fmt, "torch")
        except ValueError as e:
            t.status, t.note = "not run", str(e)
        if not use_cuda or cuda_broken:
            tc.status, tc.note = "not run", cuda_broken or env["CUDA device"]
        itype = torch.uint8 if LOWP_BITS[fmt] <= 8 else torch.int16
        t.planned = tc.planned = sum(hi - lo for lo, hi in rs)
        t0 = time.time()
        tcuda = 0.0
        for lo, hi in rs:
            if time.time() > deadline:
                break
            n = hi - lo
            slo, shi = (lo - (1 << 32), hi - (1 << 32)) if lo >= (1 << 31) else (lo, hi)
            xb = bufs.get(("x", n))
            if xb is None:
                bufs.clear()
                xb = bufs[("x", n)] = torch.empty(n, dtype=torch.int32)
            torch.arange(slo, shi, dtype=torch.int32, out=xb)
            x = xb.view(torch.float32)
            ref = x.to(dt).view(itype)  # the call under test
            if t.status != "not run":
                out = bufs.get(("out", itype))
                if out is None:
                    out = bufs[("out", itype)] = torch.empty(n, dtype=itype)
                lw.encode(fmt, "torch", x.data_ptr(), out.data_ptr(), n)
                t.add(n, *_diff(torch, ref, out, x, lo))
            if tc.status != "not run":
                tg0 = time.time()
                try:
                    xg = torch.arange(slo, shi, dtype=torch.int32, device="cuda").view(torch.float32)
                    g = xg.to(dt).view(itype)
                    rg = ref.to("cuda")
                    tc.add(n, *_diff(torch, rg, g, xg, lo))
                    del xg, g, rg
                except Exception as e:  # noqa: BLE001
                    cuda_broken = f"CUDA failed: {type(e).__name__}: {str(e)[:200]}"
                    tc.status, tc.note = "error", cuda_broken
                    log(cuda_broken)
                tcuda += time.time() - tg0
            del x, ref
        el = time.time() - t0
        t.seconds, tc.seconds = el - tcuda, tcuda
        t.finish()
        tc.finish(failing=False)
        log(f"{dname}: lowp vs torch CPU {t.mism} mismatches in {t.inputs} inputs; "
            f"torch CUDA vs CPU {tc.mism} differences in {tc.inputs}; {el:.1f} s")
    if use_cuda:
        torch.cuda.synchronize()


# ---------------------------------------------------------------- report

def code_str(fmt, c):
    return f"0x{c:04X}" if LOWP_BITS[fmt] > 8 else f"0x{c:02X}"


def table(f, title, rows, cols):
    f.write(f"\n## {title}\n\n| comparison | inputs | {cols} | on NaN inputs | time s | result | note |\n")
    f.write("|---|---:|---:|---:|---:|---|---|\n")
    for t in rows:
        f.write(f"| {t.name} | {t.inputs} | {t.mism} | {t.nan_mism} | {t.seconds:.1f} | {t.status} | {t.note} |\n")


def firsts(f, rows, lib_col, other_col):
    for t in rows:
        if not t.first:
            continue
        f.write(f"\n### First mismatches: {t.name}\n\n{t.mism} in all; the first {len(t.first)} by input bits:\n\n")
        f.write(f"| input | value | {lib_col} | {other_col} |\n|---|---|---|---|\n")
        for bits, a, b in t.first:
            f.write(f"| 0x{bits:08X} | {f32_of(bits):.9g} | {code_str(t.fmt, a)} | {code_str(t.fmt, b)} |\n")


def write_report(path, env, quick, torch_rows, cuda_rows, mld_rows, torch_missing, total):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("# lowp torch / ml_dtypes check\n\n")
        f.write("lowp's `torch` and `ml_dtypes` profiles (liblowp.so through ctypes) against the libraries "
                "themselves, produced by `tools/torch_check.py`.\n\n| | |\n|---|---|\n")
        for k, v in env.items():
            f.write(f"| {k} | {v} |\n")
        f.write(f"| inputs | {f'--quick: {len(QUICK_WINDOWS)} windows of 2^22 binary32 inputs' if quick else 'all 2^32 binary32 inputs'} |\n")
        f.write(f"| total time | {total:.1f} s |\n")
        if torch_missing:
            f.write(f"\n**torch is not installed here ({torch_missing}): the torch comparisons were skipped.**\n")
        if torch_rows:
            table(f, "lowp `torch` profile vs PyTorch `.to(dtype)` on CPU tensors (lowp failures)", torch_rows,
                  "mismatches")
        if cuda_rows:
            table(f, "PyTorch CUDA tensors vs CPU tensors (not lowp: the library against itself)", cuda_rows,
                  "differences")
        if mld_rows:
            table(f, "lowp `ml_dtypes` profile vs ml_dtypes `astype` (for the record; numpy float16 for F16)",
                  mld_rows, "mismatches")
        firsts(f, torch_rows, "torch CPU", "lowp")
        firsts(f, cuda_rows, "torch CPU", "torch CUDA")
        firsts(f, mld_rows, "ml_dtypes", "lowp")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", help="liblowp.so (default: $LOWP_LIB, then build*/ref/liblowp.so)")
    ap.add_argument("--out", default="torch-check.md", help="Markdown report")
    ap.add_argument("--quick", action="store_true", help="14 windows of 2^22 inputs instead of 2^32")
    ap.add_argument("--budget-s", type=float, default=330.0, help="stop starting new work after this")
    ap.add_argument("--chunk-log2", type=int, default=28, help="torch chunk size (log2, 20..30)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: all cores)")
    ap.add_argument("--workers", type=int, default=0, help="ml_dtypes processes (default: all cores)")
    ap.add_argument("--no-cuda", action="store_true")
    ap.add_argument("--no-mldtypes", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    if not 20 <= args.chunk_log2 <= 30:
        ap.error("--chunk-log2 must be 20..30")
    lib_path = find_lib(args.lib)
    if not lib_path:
        log("liblowp.so not found (give --lib or set LOWP_LIB)")
        return 2
    lib_path = os.path.abspath(lib_path)
    try:
        lw = Lowp(lib_path)
    except OSError as e:
        log(f"cannot load {lib_path}: {e}")
        return 2
    t0 = time.time()
    deadline = t0 + args.budget_s
    env = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
           "host": platform.node(), "CPU": cpu_model(), "CPU cores": str(os.cpu_count()), "python": platform.python_version(),
           "numpy": np.__version__, "liblowp": lib_path}
    rs = ranges(args.quick, args.chunk_log2)
    torch_rows, cuda_rows, mld_rows = [], [], []
    torch_missing = None
    if args.no_torch:
        torch_missing = "--no-torch"
    else:
        try:
            import torch  # noqa: F401
        except ImportError as e:
            torch_missing = f"import torch: {e}"
            log(f"torch is not installed ({e}): skipping the torch comparisons; "
                "the ml_dtypes record still runs; exit status will be 77")
    if not torch_missing:
        tt = time.time()
        run_torch(args, lw, rs, deadline, torch_rows, cuda_rows, env)
        log(f"torch part: {time.time() - tt:.1f} s")
    if not args.no_mldtypes:
        tm = time.time()
        v = run_mldtypes(args, lib_path, rs, deadline, mld_rows)
        env["ml_dtypes"] = v or "not importable"
        log(f"ml_dtypes part: {time.time() - tm:.1f} s")
    total = time.time() - t0
    write_report(args.out, env, args.quick, torch_rows, cuda_rows, mld_rows, torch_missing, total)

    print(f"\n{'comparison':48s} {'inputs':>12s} {'mismatch':>10s} {'on NaN':>8s} {'time s':>7s}  result")
    for t in torch_rows + cuda_rows + mld_rows:
        print(f"{t.name:48s} {t.inputs:12d} {t.mism:10d} {t.nan_mism:8d} {t.seconds:7.1f}  {t.status}"
              + (f"  ({t.note})" if t.note else ""))
    lowp_fail = any(t.mism for t in torch_rows + mld_rows)
    err = any(t.status == "error" for t in torch_rows + mld_rows)
    log(f"report {args.out}; {total:.1f} s; "
        + ("lowp DIFFERS from a library" if lowp_fail else "no lowp mismatch in what ran"))
    if lowp_fail:
        return 1
    if err:
        return 3
    if torch_missing and not args.no_torch:
        log("exit 77: torch missing, torch comparisons skipped")
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
