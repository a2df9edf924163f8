#!/usr/bin/env python3
"""tools/flashinfer_bundle.py: FlashInfer 0.7.4 for the H200 machine, which has no network: its
wheel reduced to what `import flashinfer` and the paged decode / prefill modules need, the few
pure-Python packages it imports, and (with --build) those modules prebuilt for sm_90a.

    python3 tools/flashinfer_bundle.py [--out .whl/flashinfer] [--dl DIR]
    python3 tools/flashinfer_bundle.py --build --python /path/to/python-with-torch

WHAT IT WRITES (into --out, default .whl/flashinfer at the repository root: git-ignored, carried
to the device alone by carry [".whl/flashinfer"], installed there by tools/gpu_run.sh's step
flashinfer through wheels(); 25 MB)
  flashinfer_python-0.7.4+lowp.reduced-py3-none-any.whl: tools/reduce_wheel.py's reduction of
    the 101 MB PyPI wheel (each kept file the original's bytes, checked against its RECORD):
    - the Python package without its native sources (*.cu, *.cuh, *.h, *.c: 2945 files that
      other modules' JITs read) and without the subpackages that `import flashinfer`,
      flashinfer.decode and flashinfer.prefill never import (DROP_DIRS / experimental
      below: found by listing sys.modules after those imports on torch 2.11; all their modules
      are kept where one was imported, since a function may import a sibling lazily);
    - data/include/ (FlashInfer's headers, 1.5 MB zipped; the two modules read 21 of them);
    - data/csrc/batch_prefill* and data/csrc/tvm_ffi_utils.h (the sources and Jinja templates
      the batch-prefill JIT generator copies and renders);
    - data/cccl/libcudacxx/include/ whole: the sources include 564 of its headers (nvcc -M of
      each generated source with FlashInfer's own flags: it comes first on the -I path, ahead
      of the CUDA toolkit's copy); the rest is 1.5 MB zipped, cheaper than a fragile list.
    Dropped: data/cutlass, data/spdlog, cub/ and thrust/ of data/cccl (the decode / prefill
    sources include none of them; nvcc -M says so) and data/csrc's other 300 files.
  The wheels `import flashinfer` needs beyond torch 2.11 (which brings jinja2, filelock,
    typing_extensions) and numpy (2.5.2 on the device): apache-tvm-ffi (its native core, cp312
    manylinux, the FFI through which FlashInfer 0.7 loads every module: no torch C++
    extension), tqdm, nvidia-ml-py (pynvml), requests and its four dependencies, packaging.
    Each one's absence makes the import fail (checked by hiding it); einops, click, tabulate,
    cuda-python and the cuDNN / CUTLASS-DSL packages of its METADATA are not imported by it.
    Pinned to the versions this was checked with.
  flashinfer-aot/<module>/<module>.so (--build): the two JIT modules the bench uses, built here
    for sm_90a. FlashInfer looks for a prebuilt module at flashinfer/data/aot/<name>/<name>.so
    first (jit/env.py get_aot_artifacts) and then never compiles it; gpu_run.sh copies the
    directory there after installing the wheel. The modules are the FA2 batch-prefill kernel
    with BF16 q/o and BF16 or FP8 E4M3 KV, head dim 128, no RoPE / window / soft cap, equal
    K/V strides: BatchDecodeWithPagedKVCacheWrapper(use_tensor_cores=True) and
    BatchPrefillWithPagedKVCacheWrapper (FP8 KV, or backend="fa2") both plan onto them.
    The build runs the generator from the reduced wheel (so it also proves the reduction
    holds every source the JIT reads), then ninja -j1 under nice -n 19 (20 nvcc runs: 8.5
    minutes on the shared 2-core build machine; 2.1 and 2.2 MB of sm_90a SASS, no PTX). Each .so is
    checked to link no torch / c10 / libpython (ldd), which is what lets torch 2.11 on the
    device load a module built without it.

Without --build the device JIT-compiles the two modules on first use from the reduced wheel's
sources (nvcc 13.0 and ninja are there; FLASHINFER_WORKSPACE_BASE points its cache at
$TMPDIR). --python: an interpreter with torch (any 2.x; CPU-only is enough: the generator only
reads dtypes) for --build; the downloads need only pip.

Exit 0; 2 with one line on stderr (a download, a RECORD check, a build or a link check that
failed); an output is written to a temporary name and renamed, so none is half-written.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reduce_wheel  # noqa: E402 - the one wheel reducer / checked unpacker

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FI_VERSION = "0.7.4"
FI_WHEEL = f"flashinfer_python-{FI_VERSION}-py3-none-any.whl"
# name==version: the device's Python (3.12, x86_64 glibc) picks the binary one
DEPS = ["apache-tvm-ffi==0.1.15.post2", "tqdm==4.70.1", "nvidia-ml-py==13.615.71",
        "requests==2.34.2", "urllib3==2.8.0", "idna==3.20", "certifi==2026.10.19.post1",
        "charset-normalizer==3.5.3", "packaging==26.4"]
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "any"]
# Subpackages no module of which is imported by `import flashinfer, flashinfer.decode,
# flashinfer.prefill` (0.7.4, torch 2.11): 8.9 MB of the 25 MB of zipped Python.
DROP_DIRS = {
    "batch_invariant", "cake_causal_conv1d_train_backend", "cake_fused_qk_rope_append_backend",
    "cake_fused_qk_rope_fp8_append_backend", "cake_mhc_train_backend", "cake_mhc_train_head_backend",
    "cake_nvfp4_svdquant_gemm_backend", "cake_sage_block_sparse_attention_backend",
    "cake_tp_moe_finalize_rmsnorm_backend", "cake_ulysses_backend", "cake_vsa_sm90_backend", "comm",
    "diffusion_ops", "dsv3_ops", "logits_processor", "moe_ep", "parallel_attention", "profiler",
    "sdsa", "testing", "trace_apply", "triton", "tuning_configs"}
# experimental/: 9 MB zipped, of which the import touches __init__.py and one subpackage
EXPERIMENTAL_KEEP = ("flashinfer/experimental/__init__.py", "flashinfer/experimental/cake_nvfp4_per_token/")
NATIVE = (".cu", ".cuh", ".h", ".hpp", ".c", ".cc", ".cpp", ".inc", ".jinja")
CSRC_KEEP = ("flashinfer/data/csrc/batch_prefill", "flashinfer/data/csrc/tvm_ffi_utils.h")
DATA_KEEP = ("flashinfer/data/include/", "flashinfer/data/cccl/libcudacxx/include/")
# The generator for the two modules; prints [{name, so}] as JSON. kv: BF16 and FP8 E4M3.
GEN = r"""
import json, torch
from flashinfer.jit.attention.modules import _gen_batch_prefill_primary_module as gen
out = []
for kv in (torch.bfloat16, torch.float8_e4m3fn):
    spec = gen("fa2", torch.bfloat16, kv, torch.bfloat16, torch.int32, 128, 128, 0, False, False, False)
    spec.write_ninja()
    out.append({"name": spec.name, "dir": str(spec.build_dir), "so": str(spec.jit_library_path)})
print(json.dumps(out))
"""


class Bad(Exception):
    pass


def keep_member(n):
    """Whether reduced flashinfer keeps wheel member n (the rules in the header)."""
    if not n.startswith("flashinfer/"):
        return False  # dist-info: reduce_wheel adds METADATA and WHEEL, writes RECORD
    if n.startswith("flashinfer/data/"):
        return n.startswith(DATA_KEEP) or n.startswith(CSRC_KEEP)
    parts = n.split("/")
    if len(parts) > 2 and parts[1] in DROP_DIRS:
        return False
    if n.startswith("flashinfer/experimental/") and not n.startswith(EXPERIMENTAL_KEEP):
        return False
    return not n.endswith(NATIVE)


def sh(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode:
        tail = r.stdout.strip().splitlines()[-1:] or ["(no output)"]
        raise Bad(f"{cmd[0]} {' '.join(cmd[1:4])} ... failed (rc {r.returncode}): {tail[0][:200]}")
    return r.stdout


def download(dl):
    os.makedirs(dl, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", dl]
    if not os.path.exists(os.path.join(dl, FI_WHEEL)):
        sh(pip + [f"flashinfer-python=={FI_VERSION}"])
    plat = sum((["--platform", p] for p in PLATFORMS), [])
    for d in DEPS:
        sh(pip + ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"] + plat + [d])


def dep_wheels(dl):
    found = []
    for d in DEPS:
        name, ver = d.split("==")
        pat = os.path.join(dl, f"{name.replace('-', '_')}-{ver}-*.whl")
        hits = sorted(glob.glob(pat))
        if not hits:
            raise Bad(f"{pat}: not downloaded")
        found.append(hits[-1])
    return found


def build(args, reduced, out):
    """Unpack the reduced wheel, generate the two modules' sources from it, ninja them, check
    each .so's links and copy it to out/flashinfer-aot/<name>/<name>.so (a temporary tree, renamed)."""
    site = os.path.join(args.dl, "site")
    ws = os.path.join(args.dl, "ws")
    shutil.rmtree(site, ignore_errors=True)
    reduce_wheel.unpack(reduced, site)
    env = dict(os.environ, PYTHONPATH=site, FLASHINFER_CUDA_ARCH_LIST="9.0a", FLASHINFER_WORKSPACE_BASE=ws,
               MAX_JOBS=str(args.jobs))
    mods = json.loads(sh([args.python, "-c", GEN], env=env).strip().splitlines()[-1])
    ninja = shutil.which("ninja") or os.path.join(os.path.dirname(args.python), "ninja")
    tmp = tempfile.mkdtemp(dir=out, prefix=".aot.")
    try:
        for m in mods:
            print(f"flashinfer_bundle: building {m['name']} (ninja -j{args.jobs}, nice 19)", flush=True)
            sh(["nice", "-n", "19", ninja, "-j", str(args.jobs), "-C", m["dir"], "-f", "build.ninja"])
            libs = sh(["ldd", m["so"]])
            bad = [ln.split()[0] for ln in libs.splitlines() if any(s in ln for s in ("libtorch", "libc10", "libpython"))]
            if bad:
                raise Bad(f"{m['so']} links {bad}: it would tie the device to this machine's torch")
            os.makedirs(os.path.join(tmp, m["name"]))
            shutil.copy2(m["so"], os.path.join(tmp, m["name"], m["name"] + ".so"))
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 is not a package directory's mode
        dst = os.path.join(out, "flashinfer-aot")
        shutil.rmtree(dst, ignore_errors=True)
        os.replace(tmp, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, ".whl", "flashinfer"),
                    help="where the bundle goes (default .whl/flashinfer)")
    ap.add_argument("--dl", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "lowp-flashinfer"),
                    help="downloads, the unpacked wheel and the build tree (default $TMPDIR/lowp-flashinfer)")
    ap.add_argument("--build", action="store_true", help="prebuild the two modules for sm_90a")
    ap.add_argument("--python", default=sys.executable, help="an interpreter with torch, for --build")
    ap.add_argument("--jobs", type=int, default=1, help="ninja jobs for --build (default 1)")
    args = ap.parse_args()
    try:
        download(args.dl)
        os.makedirs(args.out, exist_ok=True)
        src = os.path.join(args.dl, FI_WHEEL)
        with zipfile.ZipFile(src) as z:
            keep = [n for n in z.namelist() if keep_member(n) and not n.endswith("/")]
        reduce_wheel.reduce(src, keep, args.out)
        reduced = os.path.join(args.out, f"flashinfer_python-{FI_VERSION}+lowp.reduced-py3-none-any.whl")
        for w in dep_wheels(args.dl):
            shutil.copy2(w, os.path.join(args.out, os.path.basename(w) + ".part"))
            os.replace(os.path.join(args.out, os.path.basename(w) + ".part"), os.path.join(args.out, os.path.basename(w)))
        if args.build:
            build(args, reduced, args.out)
    except (Bad, reduce_wheel.Bad, OSError, ValueError) as e:
        print(f"flashinfer_bundle: {e}", file=sys.stderr)
        return 2
    names = [reduced] + [os.path.join(args.out, os.path.basename(w)) for w in dep_wheels(args.dl)]
    aot = glob.glob(os.path.join(args.out, "flashinfer-aot", "*", "*.so"))
    total = sum(os.path.getsize(n) for n in names + aot)
    for n in names + aot:
        print(f"flashinfer_bundle: {os.path.getsize(n) / 1e6:7.2f} MB  {os.path.relpath(n, args.out)}")
    print(f"flashinfer_bundle: {total / 1e6:.1f} MB in all in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
