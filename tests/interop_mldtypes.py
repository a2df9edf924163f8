#!/usr/bin/env python3
"""interop_mldtypes: lowp's ml_dtypes profile against ml_dtypes 0.6 / numpy astype.

For each format, the codec (format, LOWP_PROFILE_ML_DTYPES, LOWP_RN, LOWP_SAT_DEFAULT)
must give, bit for bit, what ml_dtypes (numpy for f16) gives for `x.astype(dtype)`:

    e2m1 -> ml_dtypes.float4_e2m1fn   e4m3 -> ml_dtypes.float8_e4m3fn
    e5m2 -> ml_dtypes.float8_e5m2     e8m0 -> ml_dtypes.float8_e8m0fnu
    bf16 -> ml_dtypes.bfloat16        f16  -> numpy.float16

Quick mode (default) case sets, per format:
    bf16-patterns  all 2^16 bfloat16 bit patterns widened to float32
    f16-patterns   all 2^16 binary16 values widened to float32 (numpy astype)
    random-f32     2^20 uniformly random float32 bit patterns (seeded)
    f64-random     random binary64 bit patterns and random doubles in the format's range,
                   through lowp_encode_f64 vs float64 array astype
    f64-between    doubles strictly between two adjacent binary32 values, many of them
                   next to the format's ties, through lowp_encode_f64
plus one `refusals` set: ml_dtypes has only round-to-nearest and one overflow policy per
format, so lowp_codec_init must refuse every other (mode, saturation) for this profile.

Full mode (--full): every one of the 2^32 float32 inputs, in chunks of 2^24, per format,
spread over spawned worker processes (--jobs, else env LOWP_INTEROP_JOBS, else the CPU
count up to 16; each worker runs lowp single-threaded). Progress goes to stderr when it
is a terminal; the time per format is reported. numpy's float16 cast of tiny values is
slow, so f16 dominates the run.

Output: failure lines in TestFloat style (at most 20 per format), e.g.
    e4m3 ml_dtypes rn: input 0x7fc00000 (nan) got 0xff expected 0x7f
then, last, `interop_mldtypes: N passed, M failed` where N and M count case sets
(format, input set). Exit 0 when all pass, 1 on any mismatch, 77 when numpy or
ml_dtypes is missing (ctest SKIP_RETURN_CODE).

`--quick-summary` prints only failure lines and the summary on stdout (the seed goes to
stderr); `run()` is the same check as a function for other tools (lowp conform).
Seed: --seed, else env LOWP_SEED (decimal or 0x hex), else a fixed default.
"""
import argparse
import ctypes
import os
import sys
import time

DEFAULT_SEED = 0x6C6F7770  # "lowp", as LOWP_DEFAULT_SEED in lowp/cases.h
MAX_FAIL_LINES = 20
CHUNK = 1 << 24

# Enumerations of lowp/format.h.
LOWP_FORMATS = {"e2m1": 0, "e4m3": 1, "e5m2": 2, "e8m0": 3, "bf16": 4, "f16": 5}
LOWP_ROUNDS = {"rn": 0, "rz": 1, "ru": 2, "rd": 3, "rna": 4}
LOWP_PROFILE_ML_DTYPES = 2
LOWP_SAT_DEFAULT, LOWP_SAT_OFF, LOWP_SAT_ON = -1, 0, 1
FORMAT_BITS = {"e2m1": 4, "e4m3": 8, "e5m2": 8, "e8m0": 8, "bf16": 16, "f16": 16}
# The overflow policy ml_dtypes has per format (profiles.md: e2m1 saturating only,
# everything else non-saturating only); the other one must be refused.
REFUSED_SAT = {"e2m1": LOWP_SAT_OFF, "e4m3": LOWP_SAT_ON, "e5m2": LOWP_SAT_ON,
               "e8m0": LOWP_SAT_ON, "bf16": LOWP_SAT_ON, "f16": LOWP_SAT_ON}


class LowpCodec(ctypes.Structure):
    """Mirror of `struct lowp_codec` in lowp/format.h (C enums are int). Only a pointer
    to it crosses into C (lowp_codec_init fills it), and CodecBox adds zeroed slack, so a
    struct that grows later cannot be overrun; keep the fields in step for diagnostics."""
    _fields_ = [
        ("format", ctypes.c_int),
        ("profile", ctypes.c_int),
        ("round", ctypes.c_int),
        ("saturate", ctypes.c_int),
        ("nan_rule", ctypes.c_int),
        ("nan_code", ctypes.c_uint16 * 2),
        ("nan_code_f64", ctypes.c_uint16 * 2),
        ("nan_f64_keeps_top_bits", ctypes.c_int),
        ("inf_mag", ctypes.c_uint16),
        ("ovf_mag", ctypes.c_uint16),
        ("f64_via_f32", ctypes.c_int),
        ("e8m0_zero_code", ctypes.c_uint16),
        ("e8m0_neg_is_nan", ctypes.c_int),
        ("e8m0_sub_up_any", ctypes.c_int),
    ]


class CodecBox(ctypes.Structure):
    """The codec with generous zeroed slack after it, should the struct grow."""
    _fields_ = [("codec", LowpCodec), ("_slack", ctypes.c_ubyte * 512)]


class Lowp:
    def __init__(self, path):
        self.lib = lib = ctypes.CDLL(path)
        lib.lowp_codec_init.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                        ctypes.c_size_t]
        lib.lowp_codec_init.restype = ctypes.c_int
        lib.lowp_encode_f32_u16.argtypes = [ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_size_t]
        lib.lowp_encode_f32_u16.restype = None
        lib.lowp_encode_f64.argtypes = [ctypes.c_void_p, ctypes.c_double]
        lib.lowp_encode_f64.restype = ctypes.c_uint16

    def codec(self, fmt, rnd="rn", sat=LOWP_SAT_DEFAULT):
        """Returns (box or None, rc, reason)."""
        box = CodecBox()
        why = ctypes.create_string_buffer(512)
        rc = self.lib.lowp_codec_init(ctypes.byref(box), LOWP_FORMATS[fmt],
                                      LOWP_PROFILE_ML_DTYPES, LOWP_ROUNDS[rnd], sat,
                                      why, len(why))
        reason = why.value.decode("utf-8", "replace")
        return (box if rc == 0 else None), rc, reason

    def encode_f32(self, box, x, np):
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty(x.shape, dtype=np.uint16)
        self.lib.lowp_encode_f32_u16(ctypes.byref(box), x.ctypes.data, out.ctypes.data,
                                     x.size)
        return out

    def encode_f64(self, box, x, np):
        f = self.lib.lowp_encode_f64
        ref = ctypes.byref(box)
        return np.fromiter((f(ref, v) for v in x.tolist()), dtype=np.uint16, count=x.size)


def _dtypes(np, md):
    return {"e2m1": md.float4_e2m1fn, "e4m3": md.float8_e4m3fn, "e5m2": md.float8_e5m2,
            "e8m0": md.float8_e8m0fnu, "bf16": md.bfloat16, "f16": np.float16}


class Checker:
    def __init__(self, lowp, np, md, emit, quiet):
        self.lowp, self.np, self.md = lowp, np, md
        self.dt = _dtypes(np, md)
        self.emit = emit          # failure and summary lines (stdout)
        self.quiet = quiet        # suppress info lines
        self.passed = 0
        self.failed = 0
        self.fail_lines = {}      # format -> lines printed so far

    def info(self, msg):
        if not self.quiet:
            print(msg, flush=True)

    def expected(self, fmt, x):
        return _astype(self.np, self.dt, fmt, x)

    def _fail_line(self, fmt, text):
        n = self.fail_lines.get(fmt, 0)
        if n < MAX_FAIL_LINES:
            self.emit(f"{fmt} ml_dtypes rn: {text}")
        elif n == MAX_FAIL_LINES:
            self.emit(f"{fmt} ml_dtypes rn: (further failures not shown)")
        self.fail_lines[fmt] = n + 1

    def _code(self, fmt, c):
        return f"0x{int(c):0{max(1, FORMAT_BITS[fmt] // 4)}x}"

    def compare(self, fmt, x, got, exp, f64=False):
        """Returns the mismatch count; prints failure lines."""
        np = self.np
        bad = np.nonzero(got != exp)[0]
        bits = x.view(np.uint64 if f64 else np.uint32)
        self.report(fmt, [(int(bits[i]), int(got[i]), int(exp[i]))
                          for i in bad[:MAX_FAIL_LINES + 1]], f64)
        return int(bad.size)

    def report(self, fmt, rows, f64=False):
        """rows: (input bits, got, expected) tuples."""
        np = self.np
        for bits, got, exp in rows:
            if f64:
                v = np.array([bits], dtype=np.uint64).view(np.float64)[0]
            else:
                v = np.array([bits], dtype=np.uint32).view(np.float32)[0]
            width = 16 if f64 else 8
            self._fail_line(fmt, f"input 0x{bits:0{width}x} ({v}) got {self._code(fmt, got)}"
                                 f" expected {self._code(fmt, exp)}")

    def tally(self, fmt, name, mismatches, n, seconds):
        if mismatches:
            self.failed += 1
            self.info(f"FAIL {fmt} {name}: {mismatches} of {n} inputs differ ({seconds:.2f} s)")
        else:
            self.passed += 1
            self.info(f"ok   {fmt} {name}: {n} inputs ({seconds:.2f} s)")

    def run_set(self, fmt, box, name, x, f64=False):
        """lowp's binary32 (or, with f64, binary64) encoder against ml_dtypes on the inputs x."""
        t = time.perf_counter()
        if box is None:
            self.tally(fmt, name, x.size, x.size, 0.0)
            return
        encode = self.lowp.encode_f64 if f64 else self.lowp.encode_f32
        got = encode(box, x, self.np)
        exp = self.expected(fmt, x)
        self.tally(fmt, name, self.compare(fmt, x, got, exp, f64=f64), x.size,
                   time.perf_counter() - t)

    # ---- input sets -------------------------------------------------------------------
    def finite_values(self, fmt):
        """Sorted distinct finite non-negative values of the format (from its dtype)."""
        np = self.np
        n = 1 << FORMAT_BITS[fmt]
        codes = np.arange(n, dtype=np.uint16 if n > 256 else np.uint8)
        with np.errstate(all="ignore"):
            v = codes.view(self.dt[fmt]).astype(np.float64)
        v = v[np.isfinite(v)]
        return np.unique(np.abs(v))

    def f64_random(self, fmt, rng):
        np = self.np
        bits = rng.integers(0, 1 << 64, size=1 << 15, dtype=np.uint64, endpoint=False)
        nan_payloads = np.array([0x7FF0000000000001, 0x7FF4000000000000, 0x7FF8000000000000,
                                 0x7FFFFFFFFFFFFFFF, 0x7FF0000020000000, 0x7FF000001FFFFFFF,
                                 0x7FF0000000000000], dtype=np.uint64)
        nan_payloads = np.concatenate([nan_payloads, nan_payloads | np.uint64(1 << 63)])
        v = self.finite_values(fmt)
        pos = v[v > 0]
        lo, hi = np.log2(pos.min()) - 3, np.log2(pos.max()) + 2
        mags = np.exp2(rng.uniform(lo, hi, size=1 << 15))
        mags *= np.where(rng.integers(0, 2, size=mags.size) == 1, -1.0, 1.0)
        extra = np.array([0.0, -0.0, np.inf, -np.inf, 2.0 ** -1074, -(2.0 ** -1074),
                          np.finfo(np.float64).max, -np.finfo(np.float64).max,
                          float(np.finfo(np.float32).max) * (1 + 2.0 ** -30),
                          2.0 ** -150, 2.0 ** -150 * (1 + 2.0 ** -40), 2.0 ** -149 * 0.75],
                         dtype=np.float64)
        return np.concatenate([bits.view(np.float64), nan_payloads.view(np.float64), mags,
                               extra])

    def f64_between(self, fmt, rng):
        """Doubles strictly inside (a, nextafter(a)) for binary32 a: next to every tie
        and boundary of the format (where rounding twice and once differ), and at random
        binary32 values."""
        np = self.np
        v = self.finite_values(fmt)
        if fmt == "e8m0":
            points = np.concatenate([v, v * 1.5])
        else:
            mids = (v[:-1] + v[1:]) / 2
            top = v[-1] + (v[-1] - v[-2]) / 2      # the overflow threshold
            points = np.concatenate([v, mids, [top]])
        points = points[(points > 0) & (points <= float(np.finfo(np.float32).max))]
        if points.size > 1 << 14:
            points = rng.choice(points, size=1 << 14, replace=False)
        a = points.astype(np.float32)               # exact: every point is a binary32
        rnd = np.abs(rng.standard_normal(size=1 << 14)).astype(np.float32) * \
            np.exp2(rng.integers(-130, 128, size=1 << 14)).astype(np.float32)
        rnd = rnd[np.isfinite(rnd) & (rnd > 0)]
        a = np.concatenate([a, rnd])
        below = np.nextafter(a, np.float32(0)).astype(np.float64)
        above = np.nextafter(a, np.float32(np.inf)).astype(np.float64)
        a64 = a.astype(np.float64)
        # offsets as fractions k / 2^29 of the binary32 gap: exact in binary64
        ks = [1, (1 << 28) - 1, 1 << 28, (1 << 28) + 1, (1 << 29) - 1]
        out = []
        for k in ks:
            t = k / float(1 << 29)
            up = a64 + (above - a64) * t
            dn = a64 - (a64 - below) * t
            ok_up = np.isfinite(above)
            out += [up[ok_up], dn]
        kr = rng.integers(1, 1 << 29, size=a.size).astype(np.float64) / float(1 << 29)
        out.append(a64 + (above - a64) * kr)
        x = np.concatenate(out)
        x = x[np.isfinite(x)]
        # strictly between binary32 neighbours
        x = x[x.astype(np.float32).astype(np.float64) != x]
        return np.concatenate([x, -x])

    # ---- modes ------------------------------------------------------------------------
    def refusals(self):
        t = time.perf_counter()
        bad = 0
        for fmt in LOWP_FORMATS:
            tries = [(r, LOWP_SAT_DEFAULT) for r in LOWP_ROUNDS if r != "rn"]
            tries.append(("rn", REFUSED_SAT[fmt]))
            for rnd, sat in tries:
                box, rc, reason = self.lowp.codec(fmt, rnd, sat)
                if rc != -1 or not reason.strip():
                    bad += 1
                    self.emit(f"{fmt} ml_dtypes {rnd}: lowp_codec_init(saturate={sat}) returned"
                              f" {rc} with reason '{reason}'; expected -1 with a reason"
                              " (ml_dtypes has no such conversion)")
        self.tally("all", "refusals", bad, 6 * 5, time.perf_counter() - t)

    def open_codec(self, fmt):
        box, rc, reason = self.lowp.codec(fmt)
        if box is None:
            self.emit(f"{fmt} ml_dtypes rn: lowp_codec_init returned {rc}: {reason}")
        return box

    def quick(self, seed):
        np = self.np
        rng = np.random.default_rng(seed)
        all16 = np.arange(1 << 16, dtype=np.uint32)
        bf16_in = (all16 << np.uint32(16)).view(np.float32)
        f16_in = all16.astype(np.uint16).view(np.float16).astype(np.float32)
        rand_in = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(
            np.uint32).view(np.float32)
        for fmt in LOWP_FORMATS:
            box = self.open_codec(fmt)
            self.run_set(fmt, box, "bf16-patterns", bf16_in)
            self.run_set(fmt, box, "f16-patterns", f16_in)
            self.run_set(fmt, box, "random-f32", rand_in)
            self.run_set(fmt, box, "f64-random", self.f64_random(fmt, rng), f64=True)
            self.run_set(fmt, box, "f64-between", self.f64_between(fmt, rng), f64=True)
        self.refusals()

    def full(self, lib, jobs):
        """All 2^32 binary32 inputs per format, 2^24 per chunk. With jobs > 1 the chunks
        go to spawned worker processes (numpy's casts hold the GIL, and its float16 cast
        of tiny values is slow), each with a single-threaded lowp."""
        np = self.np
        tty = sys.stderr.isatty()
        nchunks = (1 << 32) // CHUNK
        total_t = time.perf_counter()
        pool = None
        if jobs > 1:
            import multiprocessing as mp
            pool = mp.get_context("spawn").Pool(jobs, initializer=_worker_init, initargs=(lib,))
            self.info(f"full: {jobs} worker processes")
        try:
            for fmt in LOWP_FORMATS:
                box = self.open_codec(fmt)
                t = time.perf_counter()
                if box is None:
                    self.tally(fmt, "all-f32", 1 << 32, 1 << 32, 0.0)
                    continue
                if pool is not None:
                    results = pool.imap(_full_chunk, [(fmt, k) for k in range(nchunks)])
                else:
                    results = (_full_chunk_with(np, self.dt, self.lowp, box, fmt, k)
                               for k in range(nchunks))
                mism = 0
                for done, (_, nbad, rows) in enumerate(results, 1):
                    mism += nbad
                    self.report(fmt, rows)
                    if tty:
                        sys.stderr.write(f"\r{fmt}: chunk {done}/{nchunks}, {mism} mismatches,"
                                         f" {time.perf_counter() - t:.0f} s")
                        sys.stderr.flush()
                if tty:
                    sys.stderr.write("\n")
                dt = time.perf_counter() - t
                self.tally(fmt, "all-f32", mism, 1 << 32, dt)
                self.info(f"time {fmt}: {dt:.1f} s for 2^32 inputs")
        finally:
            if pool is not None:
                pool.close()
                pool.join()
        self.info(f"time total: {time.perf_counter() - total_t:.1f} s")
        self.refusals()


def _astype(np, dt, fmt, x):
    """What ml_dtypes (numpy for f16) gives for x.astype(dtype), as uint16 codes."""
    with np.errstate(all="ignore"):
        y = x.astype(dt[fmt])
    return y.view(np.uint16 if FORMAT_BITS[fmt] == 16 else np.uint8).astype(np.uint16)


def _full_chunk_with(np, dt, lowp, box, fmt, chunk):
    x = (np.arange(CHUNK, dtype=np.uint32) + np.uint32(chunk * CHUNK)).view(np.float32)
    got = lowp.encode_f32(box, x, np)
    exp = _astype(np, dt, fmt, x)
    bad = np.nonzero(got != exp)[0]
    xb = x.view(np.uint32)
    return chunk, int(bad.size), [(int(xb[i]), int(got[i]), int(exp[i]))
                                  for i in bad[:MAX_FAIL_LINES + 1]]


_WORKER = {}


def _worker_init(lib):
    os.environ["OMP_NUM_THREADS"] = "1"  # before liblowp (and libgomp) load here
    import warnings
    import numpy as np
    import ml_dtypes as md
    warnings.simplefilter("ignore", RuntimeWarning)
    _WORKER.update(np=np, dt=_dtypes(np, md), lowp=Lowp(lib), boxes={})


def _full_chunk(task):
    fmt, chunk = task
    w = _WORKER
    box = w["boxes"].get(fmt)
    if box is None:
        box, rc, reason = w["lowp"].codec(fmt)
        if box is None:
            raise RuntimeError(f"{fmt}: lowp_codec_init returned {rc}: {reason}")
        w["boxes"][fmt] = box
    return _full_chunk_with(w["np"], w["dt"], w["lowp"], box, fmt, chunk)


def run(lib, full=False, seed=None, quiet=False, emit=None, jobs=None):
    """The check as a function. Returns (passed, failed) case-set counts, or None when
    numpy/ml_dtypes are missing. Failure lines and the summary go to emit (print)."""
    emit = emit or (lambda s: print(s, flush=True))
    try:
        import numpy as np
        import ml_dtypes as md
    except ImportError as e:  # pragma: no cover
        emit(f"interop_mldtypes: skipped: cannot import numpy/ml_dtypes ({e})")
        return None
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)
    lowp = Lowp(lib)
    chk = Checker(lowp, np, md, emit, quiet)
    if seed is None:
        seed = DEFAULT_SEED
    if not quiet:
        print(f"interop_mldtypes: numpy {np.__version__}, ml_dtypes {md.__version__},"
              f" lib {lib}, mode {'full' if full else 'quick'}, seed 0x{seed:x}", flush=True)
    else:
        sys.stderr.write(f"interop_mldtypes: seed 0x{seed:x}\n")
    if full:
        if jobs is None:
            jobs = int(os.environ.get("LOWP_INTEROP_JOBS", "0") or 0) or min(16, os.cpu_count() or 1)
        chk.full(os.path.abspath(lib), max(1, jobs))
    else:
        chk.quick(seed)
    emit(f"interop_mldtypes: {chk.passed} passed, {chk.failed} failed")
    return chk.passed, chk.failed


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="path to liblowp.so")
    ap.add_argument("--full", action="store_true", help="all 2^32 float32 inputs")
    ap.add_argument("--quick-summary", action="store_true",
                    help="print only failure lines and the summary")
    ap.add_argument("--seed", type=lambda s: int(s, 0), default=None)
    ap.add_argument("--jobs", type=int, default=None,
                    help="worker processes for --full (default: env LOWP_INTEROP_JOBS, else"
                         " the CPU count, at most 16)")
    a = ap.parse_args(argv)
    seed = a.seed
    if seed is None and os.environ.get("LOWP_SEED"):
        try:
            seed = int(os.environ["LOWP_SEED"], 0)
        except ValueError:
            print(f"interop_mldtypes: bad LOWP_SEED '{os.environ['LOWP_SEED']}'")
            return 2
    try:
        import numpy  # noqa: F401
        import ml_dtypes  # noqa: F401
    except ImportError as e:
        print(f"interop_mldtypes: skipped: cannot import numpy/ml_dtypes ({e})")
        return 77
    try:
        res = run(a.lib, full=a.full, seed=seed, quiet=a.quick_summary, jobs=a.jobs)
    except OSError as e:
        print(f"interop_mldtypes: cannot load {a.lib}: {e}")
        print("interop_mldtypes: 0 passed, 1 failed")
        return 1
    if res is None:
        return 77
    return 0 if res[1] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
