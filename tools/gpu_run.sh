#!/usr/bin/env bash
# tools/gpu_run.sh: the one script run on the GPU machine (an H200) through the device
# tool. From the repository root:
#
#   bash tools/gpu_run.sh            (OUT=<folder> receives the reports; default
#                                     $TMPDIR/lowp-gpu-out, TMPDIR defaulting to /tmp)
#
# It builds only what it needs, then runs:
#   1. lowp_gpu_cvt_check  -> $OUT/gpu-cvt-h200.md   (PTX cvt vs lowp's cuda profile, 2^32 sweeps)
#   2. tools/torch_check.py -> $OUT/torch-check.md   (lowp torch / ml_dtypes profiles vs the libraries,
#                                                     torch CPU vs torch CUDA, 2^32 inputs)
#   3. tools/torch_check.py --quick with ATEN_CPU_CAPABILITY=default
#                          -> $OUT/torch-check-cpu-default.md (torch's scalar CPU kernels: its
#                             vectorized kernels treat NaN differently for bf16 on AVX2/AVX512)
#   4. the GPU kernels (step "kernels", issue #5), each program writing its report to $OUT:
#      lowp_gpu_mma_probe     -> gpu-mma-probe-h200.md   (mma.sync bf16 vs lowp's MMA model)
#      lowp_gpu_kv_write_check -> gpu-kv-write-h200.md  (quantize-on-write vs the CPU writer)
#      lowp gpu bench --kernel kv-write -> gpu-kv-write-bench-h200.csv/.txt (its time beside
#                                a copy of the same bytes; LOWP_GPU_KVW_BENCH_ARGS)
#      lowp gpu conform       -> gpu-decode-conform-h200.md (decode vs emulator and bound)
#      compute-sanitizer memcheck / racecheck on reduced runs -> sanitizer-*.log
#        (step sanitize: the decode kernels; step sanitize-kv: quantize-on-write)
#      lowp gpu attn vs lowp gpu attn --emulate (byte for byte) on a generated case
#      lowp gpu bench         -> gpu-bench-h200.csv/.txt; tools/sdpa_bench.py -> sdpa-bench-h200.csv
#      tools/gpu_tune.sh      -> gpu-tune.txt (step tune, not in "kernels": the decode's ring
#                                size, which changes speed and never a bit of output)
#      lowp_gpu_select_check  -> select-gpu-h200.md (step select, not in "kernels": the sparse-
#                                selection kernels vs the CPU models of lowp/select.h, 10^5 cases
#                                per selector and format, the sparse decode vs the decode emulator,
#                                the scoring's bandwidth against a plain read at 128K and sparse vs
#                                dense decode over 2051 tokens; then compute-sanitizer memcheck /
#                                racecheck on a small run -> sanitizer-*-select.log. Arguments in
#                                LOWP_GPU_SELECT_ARGS (default: --bench --budget-s what is left)
#      tools/quantlib_check.py -> quantlib-check-h200.md, quantlib-check-h200-cpu.md (step
#                                quantlib, only when asked: torchao / nvidia-modelopt /
#                                compressed-tensors on CUDA and CPU tensors against lowp's
#                                recipes, byte for byte; the three wheels carried in .whl/,
#                                installed --no-deps into $TMPDIR/lowp-wheels-py)
#      tools/certify_h200.py  -> certify-h200.md/.json (step certify, only when asked: torch SDPA
#                                per backend on BF16 and FP8-dequantized caches, FlashInfer's FP8
#                                batch decode if flashinfer imports, lowp gpu attn; each kernel's
#                                output certified through `import lowp`; args in LOWP_CERTIFY_ARGS,
#                                e.g. "--kernels sdpa-flash-bf16,lowp-gpu-fp8 --quick"; SGLang's
#                                Triton decode (--kernels sglang-triton-bf16,...) from the sglang
#                                wheel in .whl/, installed as for quantlib)
#   5. step "extend" (issue #22, only when asked: LOWP_GPU_RUN_STEPS=extend): the extend /
#      prefill attention kernel (gpu/kernels/extend.cu):
#      lowp gpu conform --kernel extend,prefill -> gpu-extend-conform-h200.md (GPU vs
#                                emulator bit for bit and binary64 within the bound;
#                                LOWP_GPU_EXTEND_ARGS, default --quick; "" for the full 10^5
#                                cases per kernel; LOWP_GPU_EXTEND_LIMIT seconds, default 300)
#                                LOWP_GPU_EXTEND_SDPA=0 skips tools/sdpa_extend_bench.py (the PyTorch side of the extend bench)
#      the workspace cases with LOWP_GPU_WS_FILL=staged (the fill's staged kernel)
#                                -> gpu-extend-ws-staged-h200.md (LOWP_GPU_WS_STAGED_ARGS)
#      compute-sanitizer memcheck / racecheck on one extend case and 16 workspace cases,
#                                the staged fill -> sanitizer-*-extend.log
#      lowp gpu bench --kernel extend,prefill -> gpu-extend-bench-h200.txt/.csv (TFLOP/s per
#                                shape; LOWP_GPU_EXTEND_BENCH_ARGS)
#      the same bench's extends with LOWP_GPU_WS_FILL=rows -> gpu-extend-bench-rows-h200.txt/.csv
#      tools/sdpa_extend_bench.py -> sdpa-extend-bench-h200.csv (PyTorch SDPA, same shapes)
#      lowp gpu attn --path extend|prefill vs --emulate (byte for byte) and vs lowp attn
#                                (within the bound) on a 300-query chunk over 2000 tokens
#   6. step "ex2" (issue #22 item 3, only when asked): lowp_gpu_ex2_probe -> ex2-approx-h200.md,
#      ex2_err_0_1.i8, ex2_err_m1_0.i8 (ex2.approx.ftz.f32 on all 2^32 inputs and its error on
#      two 2^23-point grids; the three files stay out of the results archive, returned as is)
#   6b. step "flashinfer" (issue #22, only when asked): tools/flashinfer_bench.py ->
#      flashinfer-bench-h200.csv (paged decode, tensor-core path, BF16 and FP8 KV, the shapes
#      of sdpa_bench.py) and flashinfer-extend-bench-h200.csv (FA2 paged prefill, FP8 KV, the
#      shapes of sdpa_extend_bench.py); FlashInfer 0.7.4 from the bundle in .whl/flashinfer
#      written by tools/flashinfer_bundle.py (installed as for quantlib; its prebuilt modules in
#      .whl/flashinfer/flashinfer-aot are copied into the package, else it JIT-compiles them into
#      $TMPDIR/lowp-flashinfer-ws); arguments in LOWP_FLASHINFER_ARGS (e.g. --quick). Then
#      tools/certify_h200.py --kernels flashinfer-fp8,flashinfer-bf16 -> certify-h200-flashinfer.md
#      (issue #20: the same modules' decode certified through import lowp; LOWP_FLASHINFER_CERTIFY=0
#      skips it, leaving the call's time to the benches).
#   7. step "mpi" (issue #23, only when asked): tools/gpu_mpi.sh -> mpi-h200.md: lowp gpu
#      conform (LOWP_GPU_MPI_ARGS, default --cases 20000) unsharded and as 2 MPI ranks
#      (tools/lowp_mpi.sh, rank 0 merges), results and reports cmp'ed, both timed; Open MPI
#      from the .deb files carried in .deb/mpi (carry [".deb"]).
# Steps: LOWP_GPU_RUN_STEPS (default "cvt torch kernels"); any subset of
#   cvt torch mma kvwrite decode sanitize sanitize-kv attn bench tune prof certify extend select quantlib ex2 mpi flashinfer
#   ("kernels" = mma kvwrite decode sanitize sanitize-kv attn bench; prof = tools/gpu_prof.sh,
#   Nsight Compute on the decode kernel, arguments in LOWP_GPU_PROF_ARGS). LOWP_GPU_RUN_EXTRA:
#   a shell command run after the steps (with LOWP and OUT set), its output in $OUT/extra.txt.
# LOWP_GPU_CONFORM_ARGS (default empty: 10^5 cases per format) is passed to lowp gpu conform;
# LOWP_GPU_BENCH_ARGS to lowp gpu bench; LOWP_GPU_RUN_ARCHS (default "90;100a-real;120a-real") to CMake.
# Everything printed also goes to $OUT/gpu-run.log; the build's own output to $OUT/build.log.
# A short summary table is printed last. Target: done within about 8 minutes (budget below).
#
# Building. The machine has cmake, gcc and nvcc 13.0 but no libmpfr-dev, no Check and no
# internet. The script configures the top-level CMake with -DLOWP_BUILD_TESTS=OFF and builds
# the targets lowp (liblowp.so) and lowp_gpu_cvt_check. The top level requires MPFR through
# pkg-config. If pkg-config cannot find mpfr, the script looks for Debian packages in .deb/
# at the repository root (ignored by git, so the device call must carry it: carry [".deb"])
# and unpacks them with dpkg -x into $TMPDIR/lowp-deps (TMPDIR: /tmp when unset).
# Prepare it here with:
#     mkdir -p .deb && (cd .deb && apt-get download libmpfr-dev libmpfr6 libgmp-dev libgmp10 \
#                                      libjansson-dev libjansson4 \
#                                      pkgconf pkgconf-bin libpkgconf3)
# (pkg-config itself may be missing there too; the runtime libraries are carried so the
# unpacked .so links resolve). If CMake still fails, the script falls back to a direct
# build with gcc and nvcc that needs no MPFR at all: liblowp.so from ref/codec/src/format.c and
# format_array.c (the fast codec does not use MPFR), and the check program from gpu/.
#
# Knobs (for trying it elsewhere): LOWP_GPU_RUN_BUDGET (seconds, default 480),
# LOWP_GPU_RUN_QUICK=1 (--quick everywhere), LOWP_GPU_RUN_FORCE_DIRECT=1 (skip CMake),
# LOWP_BUILD_ROOT (where build-device/ and build-direct/ go; default the repository root),
# LOWP_DEB_DIR (default .deb).
set -u
set -o pipefail
cd "$(dirname "$0")/.." || exit 3
ROOT=$(pwd)
OUT=${OUT:-${TMPDIR:-/tmp}/lowp-gpu-out}
mkdir -p "$OUT" || exit 3
LOG=$OUT/gpu-run.log
BLOG=$OUT/build.log
: >"$BLOG"

main() {
T0=$(date +%s)
BUDGET=${LOWP_GPU_RUN_BUDGET:-480} # seconds for the whole script; the device limit is 600
el() { echo $(($(date +%s) - T0)); }
say() { echo "[gpu_run $(el)s] $*"; }
left() { echo $((BUDGET - $(el))); }
NPROC=$(nproc 2>/dev/null || echo 8)
export PYTHONUNBUFFERED=1

declare -a SUM_STEP SUM_STATUS SUM_TIME SUM_NOTE
summ() { SUM_STEP+=("$1"); SUM_STATUS+=("$2"); SUM_TIME+=("$3"); SUM_NOTE+=("$4"); }

# ---------------------------------------------------------------- environment
say "repository $ROOT; OUT=$OUT; $NPROC cores; budget ${BUDGET}s"
command -v nvcc >/dev/null 2>&1 || export PATH=$PATH:/usr/local/cuda/bin
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1 | sed 's/^/  /'
nvcc --version 2>&1 | tail -2 | sed 's/^/  /'
cmake --version 2>&1 | head -1 | sed 's/^/  /'
gcc --version 2>&1 | head -1 | sed 's/^/  /'
grep -m1 "model name" /proc/cpuinfo | sed 's/^/  /'
python3 -c 'import sys, numpy; print("  python", sys.version.split()[0], "numpy", numpy.__version__)' 2>&1
python3 -c 'import torch; print("  torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1 | tail -1
python3 -c 'import ml_dtypes; print("  ml_dtypes", ml_dtypes.__version__)' 2>&1 | tail -1

# ---------------------------------------------------------------- MPFR from carried .deb files
have_mpfr() { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists mpfr 2>/dev/null; }
DEBS=${LOWP_DEB_DIR:-$ROOT/.deb}
BROOT=${LOWP_BUILD_ROOT:-$ROOT}
QUICK=""
[ "${LOWP_GPU_RUN_QUICK:-0}" = 1 ] && QUICK=--quick
STEPS=" ${LOWP_GPU_RUN_STEPS:-cvt torch kernels} "
STEPS=${STEPS/ kernels / mma kvwrite decode sanitize sanitize-kv attn bench }
want() { case "$STEPS" in *" $1 "*) return 0 ;; esac; return 1; }
say "steps:$STEPS"
KERNELS=0
for k in mma kvwrite decode sanitize sanitize-kv attn bench tune prof certify extend select quantlib ex2 mpi flashinfer; do want $k && KERNELS=1; done
[ -n "${LOWP_GPU_RUN_EXTRA:-}" ] && KERNELS=1
# the kernel targets the chosen steps run (lowp always)
TARGETS=lowp_cli
want mma && TARGETS="$TARGETS lowp_gpu_mma_probe"
{ want kvwrite || want sanitize-kv; } && TARGETS="$TARGETS lowp_gpu_kv_write_check"
want sanitize && TARGETS="$TARGETS lowp_gpu_decode_check"
{ want certify || want quantlib || want flashinfer; } && TARGETS="$TARGETS lowp" # liblowp.so, for import lowp
# extend: lowp_cli alone (lowp gpu conform / bench --kernel extend,prefill)
want select && TARGETS="$TARGETS lowp_gpu_select_check"
want ex2 && TARGETS="$TARGETS lowp_gpu_ex2_probe"
if ! have_mpfr && ls "$DEBS"/*.deb >/dev/null 2>&1; then
  P=${TMPDIR:-/tmp}/lowp-deps
  say "mpfr not found by pkg-config; unpacking $(ls "$DEBS"/*.deb | wc -l) carried .deb files from $DEBS into $P"
  mkdir -p "$P"
  for d in "$DEBS"/*.deb; do dpkg -x "$d" "$P" || say "dpkg -x $d failed"; done
  LIBD=$(ls -d "$P"/usr/lib/*-linux-gnu 2>/dev/null | head -1)
  [ -n "$LIBD" ] || LIBD=$P/usr/lib
  # .pc files say prefix=/usr: point them at the unpacked tree
  for pc in "$LIBD"/pkgconfig/*.pc "$P"/usr/share/pkgconfig/*.pc; do
    [ -f "$pc" ] && sed -i "s|^prefix=.*|prefix=$P/usr|; s|^libdir=/usr|libdir=$P/usr|; s|^includedir=/usr|includedir=$P/usr|" "$pc"
  done
  # a dev .so link whose runtime library was not carried: point it at the system's
  for so in "$LIBD"/libmpfr.so "$LIBD"/libgmp.so "$LIBD"/libjansson.so; do
    if [ -L "$so" ] && [ ! -e "$so" ]; then
      base=$(basename "$so")
      sys=$(ls /usr/lib/*-linux-gnu/"$base".[0-9]* /lib/*-linux-gnu/"$base".[0-9]* 2>/dev/null | head -1)
      [ -n "$sys" ] && ln -sf "$sys" "$so" && say "linked $so -> $sys"
    fi
  done
  export PKG_CONFIG_PATH=$LIBD/pkgconfig:$P/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  # mpfr.h includes gmp.h, which Debian keeps in the multiarch include folder
  export CPATH=$(ls -d "$P"/usr/include/*-linux-gnu 2>/dev/null | head -1)${CPATH:+:$CPATH}
  # No global LD_LIBRARY_PATH: the compilers use the system's own gmp/mpfr. liblowp.so
  # finds the unpacked libmpfr through the build tree's RPATH (CMake links it by full path).
  if ! command -v pkg-config >/dev/null 2>&1 && [ -x "$P/usr/bin/pkgconf" ]; then
    mkdir -p "$P/bin"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' \
      "$LIBD" "$P/usr/bin/pkgconf" >"$P/bin/pkg-config"
    chmod +x "$P/bin/pkg-config"
    export PATH=$P/bin:$PATH
    say "pkg-config: using the unpacked pkgconf ($P/bin/pkg-config)"
  fi
  have_mpfr && say "mpfr now found: $(pkg-config --modversion mpfr)" || say "mpfr still not found"
fi

# ---------------------------------------------------------------- build
# CMake first, one target at a time (a module of ref/ half brought up must not cost the
# check program); whatever it could not build comes from the direct gcc/nvcc build.
LIB="" CHECK=""
tb=$(date +%s)
B=$BROOT/build-device
if [ "${LOWP_GPU_RUN_FORCE_DIRECT:-0}" = 1 ]; then
  summ "build (cmake)" "skipped (forced)" 0 "LOWP_GPU_RUN_FORCE_DIRECT=1"
else
  say "cmake configure (LOWP_BUILD_TESTS=OFF) into $B"
  if cmake -S "$ROOT" -B "$B" -DCMAKE_BUILD_TYPE=Release -DLOWP_BUILD_TESTS=OFF \
       -DLOWP_GPU_CUDA_ARCHITECTURES="${LOWP_GPU_RUN_ARCHS:-90;100a-real;120a-real}" >>"$BLOG" 2>&1; then
    if [ $KERNELS = 1 ]; then
      for t in $TARGETS; do
        say "cmake build $t"
        cmake --build "$B" -j "$NPROC" --target $t >>"$BLOG" 2>&1 || say "build of $t FAILED"
      done
    fi
    if want cvt; then
    say "cmake build lowp_gpu_cvt_check"
    cmake --build "$B" -j "$NPROC" --target lowp_gpu_cvt_check >>"$BLOG" 2>&1 && CHECK=$B/gpu/lowp_gpu_cvt_check
    fi
    if want torch; then
    say "cmake build lowp (liblowp.so)"
    cmake --build "$B" -j "$NPROC" --target lowp >>"$BLOG" 2>&1 && LIB=$B/ref/liblowp.so
    fi
  fi
  if ! want cvt && ! want torch; then
    summ "build (cmake)" "$([ -x "$B/tools/lowp" ] && echo ok || echo FAILED)" $(($(date +%s) - tb)) "kernel targets; see build.log"
  elif [ -n "$CHECK" ] && [ -n "$LIB" ]; then
    summ "build (cmake)" ok $(($(date +%s) - tb)) "lowp, lowp_gpu_cvt_check; sm_90, sm_100a, sm_120a"
  else
    say "the CMake build did not give everything (check=${CHECK:-none} lib=${LIB:-none}); last lines of build.log:"
    tail -15 "$BLOG" | sed 's/^/  | /'
    summ "build (cmake)" FAILED $(($(date +%s) - tb)) "check=${CHECK:+ok} lib=${LIB:+ok}; see build.log"
  fi
fi
if [ -z "$CHECK" ] && want cvt; then
  say "direct build of lowp_gpu_cvt_check (gcc + nvcc, no MPFR)"
  tb=$(date +%s)
  D=$BROOT/build-direct
  mkdir -p "$D"
  CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
  INC="-I$ROOT/ref/codec/include -I$ROOT/ref/common/include -I$ROOT/ref/study/include -I$ROOT/gpu/include -I$ROOT/gpu -I$CUDA_HOME/include"
  if {
      gcc -std=c11 -O3 -fopenmp -fPIC $INC -c ref/codec/src/format.c -o "$D/format.o" &&
      gcc -std=c11 -O3 -fopenmp -fPIC $INC -c ref/codec/src/format_array.c -o "$D/format_array.o" &&
      gcc -std=c11 -O3 -fPIC $INC -c ref/common/src/why.c -o "$D/why.o" &&
      gcc -std=c11 -O3 -fPIC $INC -c ref/study/src/cases.c -o "$D/cases.o" &&
      gcc -std=c11 -O2 -fopenmp $INC -c gpu/check/sweep.c -o "$D/sweep.o" &&
      gcc -std=c11 -O2 -fopenmp $INC -c gpu/check/cvt_check.c -o "$D/cvt_check.o" &&
      nvcc -std=c++17 -O3 --threads 0 $INC \
        -gencode arch=compute_90,code=sm_90 -gencode arch=compute_100a,code=sm_100a \
        -gencode arch=compute_120a,code=sm_120a -c gpu/kernels/cvt.cu -o "$D/cvt.o" &&
      g++ -fopenmp -o "$D/lowp_gpu_cvt_check" "$D/cvt_check.o" "$D/sweep.o" "$D/cvt.o" "$D/format.o" \
        "$D/format_array.o" "$D/why.o" "$D/cases.o" -L"$CUDA_HOME/lib64" -lcudart_static -ldl -lrt -lpthread -lm
    } >>"$BLOG" 2>&1; then
    CHECK=$D/lowp_gpu_cvt_check
    summ "build (direct) check program" ok $(($(date +%s) - tb)) "gcc + nvcc, no MPFR; sm_90, sm_100a, sm_120a"
  else
    say "the direct build failed too:"
    tail -20 "$BLOG" | sed 's/^/  | /'
    summ "build (direct) check program" FAILED $(($(date +%s) - tb)) "see build.log"
  fi
fi
say "build done: lib=${LIB:-none} check=${CHECK:-none}"
# torch_check.py needs only the codec: if liblowp.so does not load (a module half brought
# up, say), build the codec alone (format.c, format_array.c) and use that.
if want torch && { [ -z "$LIB" ] || ! python3 -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1])' "$LIB" >>"$BLOG" 2>&1; }; then
  say "${LIB:-liblowp.so} missing or not loadable (see build.log); building the codec alone for torch_check.py"
  mkdir -p "$BROOT/build-codec"
  if gcc -std=c11 -O3 -fopenmp -fPIC -shared -I"$ROOT/ref/codec/include" -I"$ROOT/ref/common/include" ref/codec/src/format.c ref/codec/src/format_array.c ref/common/src/why.c \
       -o "$BROOT/build-codec/liblowp.so" -lm >>"$BLOG" 2>&1; then
    LIB=$BROOT/build-codec/liblowp.so
    summ "codec-only liblowp.so" ok 0 "format.c + format_array.c: the full liblowp.so was not usable"
  else
    LIB=""
    summ "codec-only liblowp.so" FAILED 0 "see build.log"
  fi
fi

# ---------------------------------------------------------------- 1. hardware cvt vs lowp
if ! want cvt; then
  :
elif [ -n "$CHECK" ]; then
  t=$(date +%s)
  lim=$(($(left) - 150)) # keep room for the torch check
  [ $lim -gt 360 ] && lim=360
  [ $lim -lt 60 ] && lim=60
  say "lowp_gpu_cvt_check (limit ${lim}s)"
  timeout -k 5 $lim "$CHECK" $QUICK "$OUT/gpu-cvt-h200.md"
  rc=$?
  case $rc in
    0) st=pass ;; 1) st=MISMATCH ;; 77) st="skipped (no GPU)" ;; 124|137) st="TIMEOUT" ;; *) st="ERROR rc=$rc" ;;
  esac
  summ "lowp_gpu_cvt_check" "$st" $(($(date +%s) - t)) "gpu-cvt-h200.md"
else
  summ "lowp_gpu_cvt_check" "not run" 0 "no build"
fi

# ---------------------------------------------------------------- 2. torch / ml_dtypes vs lowp
if ! want torch; then
  :
elif [ -n "$LIB" ]; then
  t=$(date +%s)
  rem=$(left)
  tb_s=$((rem - 75)) # the python budget; the rest covers its last chunk, the report and step 3
  [ $tb_s -lt 30 ] && tb_s=30
  lim=$((tb_s + 45))
  say "torch_check.py (budget ${tb_s}s, limit ${lim}s)"
  timeout -k 5 $lim python3 tools/torch_check.py --lib "$LIB" --out "$OUT/torch-check.md" --budget-s "$tb_s" $QUICK
  rc=$?
  case $rc in
    0) st=pass ;; 1) st=MISMATCH ;; 77) st="skipped (no torch)" ;; 124|137) st="TIMEOUT" ;; *) st="ERROR rc=$rc" ;;
  esac
  summ "torch_check.py${QUICK:+ --quick}" "$st" $(($(date +%s) - t)) "torch-check.md"

  # ------------------------------------------------------------ 3. torch's scalar CPU kernels
  rem=$(left)
  if [ "$rem" -gt 25 ]; then
    t=$(date +%s)
    say "torch_check.py --quick with ATEN_CPU_CAPABILITY=default (limit $((rem - 5))s)"
    ATEN_CPU_CAPABILITY=default timeout -k 5 $((rem - 5)) python3 tools/torch_check.py --lib "$LIB" \
      --out "$OUT/torch-check-cpu-default.md" --quick --no-cuda --no-mldtypes --budget-s $((rem - 20))
    rc=$?
    case $rc in
      0) st=pass ;; 1) st=MISMATCH ;; 77) st="skipped (no torch)" ;; 124|137) st="TIMEOUT" ;; *) st="ERROR rc=$rc" ;;
    esac
    summ "torch_check.py --quick, scalar CPU" "$st" $(($(date +%s) - t)) "torch-check-cpu-default.md"
  else
    summ "torch_check.py --quick, scalar CPU" "not run" 0 "no time left"
  fi
else
  summ "torch_check.py" "not run" 0 "no liblowp.so"
fi


# ---------------------------------------------------------------- 4. the GPU kernels
# run_step NAME LIMIT REPORT CMD...: a step with a time limit, its exit status in the summary
run_step() {
  local name=$1 lim=$2 rep=$3; shift 3
  local t=$(date +%s) rc st
  [ "$lim" -gt "$(($(left) - 5))" ] && lim=$(($(left) - 5))
  if [ "$lim" -lt 10 ]; then summ "$name" "not run" 0 "no time left"; return; fi
  say "$name (limit ${lim}s): $*"
  timeout -k 5 "$lim" "$@"
  rc=$?
  case $rc in
    0) st=pass ;; 1) st=FAIL ;; 77) st="skipped (no GPU)" ;; 124|137) st=TIMEOUT ;; *) st="ERROR rc=$rc" ;;
  esac
  summ "$name" "$st" $(($(date +%s) - t)) "$rep"
}

# sanitize NAME TOOL LIMIT TAG PROG ARGS...: compute-sanitizer TOOL over PROG ARGS... as the
# step "sanitizer TOOL: NAME", its output in sanitizer-TOOL-TAG.log. The verdict is the
# sanitizer's own, read from the log: --error-exitcode 99 keeps the program's exit status
# apart (99: findings -> FAIL); the program's 77 (no GPU) passes through.
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
sanitize() {
  local name=$1 tool=$2 lim=$3 tag=$4; shift 4
  if [ -z "$CS" ]; then summ "compute-sanitizer ($tool: $name)" "not found" 0 ""; return; fi
  run_step "sanitizer $tool: $name" "$lim" "sanitizer-$tool-$tag.log" sh -c '
    cs=$1 tool=$2 log=$3; shift 3
    "$cs" --tool "$tool" --error-exitcode 99 "$@" > "$log" 2>&1; r=$?
    [ $r = 99 ] && exit 1
    [ $r = 77 ] && exit 77
    grep -Eq "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards" "$log"' \
    sh "$CS" "$tool" "$OUT/sanitizer-$tool-$tag.log" "$@"
}
GPUB=$B/gpu
LOWP=$B/tools/lowp
if want decode; then
  if [ -x "$LOWP" ]; then
    run_step "lowp gpu conform" 400 gpu-decode-conform-h200.md "$LOWP" gpu conform \
      --report "$OUT/gpu-decode-conform-h200.md" ${LOWP_GPU_CONFORM_ARGS:-}
  else summ "lowp gpu conform" "not built" 0 "see build.log"; fi
fi
if want sanitize || want sanitize-kv; then
  for tool in memcheck racecheck; do
    # a round of configurations per thread count: 2 threads -> 32 configurations per format
    # (about 40 s under memcheck on the H200), 1 thread and two formats under racecheck
    thr=2; fm=nvfp4,bf16,fp8_e4m3,mxfp4; [ $tool = racecheck ] && { thr=1; fm=nvfp4,bf16; }
    want sanitize && [ -x "$GPUB/lowp_gpu_decode_check" ] && sanitize decode $tool 150 decode \
      "$GPUB/lowp_gpu_decode_check" "$OUT/san-$tool-decode.md" --cases 1 --long 0 --threads $thr --formats $fm
    want sanitize-kv && [ -x "$GPUB/lowp_gpu_kv_write_check" ] && sanitize "kv write" $tool 120 kvwrite \
      "$GPUB/lowp_gpu_kv_write_check" "$OUT/san-$tool-kvwrite.md" --quick --cases 20
    # (bash exports an assignment before a function call to the commands it runs)
    want sanitize-kv && [ -x "$GPUB/lowp_gpu_kv_write_check" ] && LOWP_GPU_KV_WRITE_SHARE=wide \
      sanitize "kv write (wide)" $tool 120 kvwrite-wide \
      "$GPUB/lowp_gpu_kv_write_check" "$OUT/san-$tool-kvwrite-wide.md" --quick --cases 20
  done
fi
if want attn && [ -x "$LOWP" ]; then
  python3 - "$OUT" <<'PYEOF'
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(20261129)
np.save(out + "/attn-q.npy", rng.standard_normal((1, 32, 128)).astype(np.float32))
k = rng.standard_normal((5000, 8, 128)).astype(np.float32)
k[:, :, 7] *= 30.0  # an outlier channel, as real keys have
np.save(out + "/attn-k.npy", k)
np.save(out + "/attn-v.npy", rng.standard_normal((5000, 8, 128)).astype(np.float32))
PYEOF
  for f in nvfp4 mxfp4 fp8_e4m3 bf16; do
    t=$(date +%s)
    "$LOWP" gpu attn --q "$OUT/attn-q.npy" --k "$OUT/attn-k.npy" --v "$OUT/attn-v.npy" --kv-format $f \
      --out "$OUT/attn-gpu-$f.npy" > "$OUT/attn-gpu-$f.txt" 2>&1
    "$LOWP" gpu attn --q "$OUT/attn-q.npy" --k "$OUT/attn-k.npy" --v "$OUT/attn-v.npy" --kv-format $f \
      --out "$OUT/attn-emu-$f.npy" --emulate > "$OUT/attn-emu-$f.txt" 2>&1
    if cmp -s "$OUT/attn-gpu-$f.npy" "$OUT/attn-emu-$f.npy"; then st=identical; else st=DIFFERENT; fi
    summ "gpu attn vs --emulate ($f)" "$st" $(($(date +%s) - t)) "attn-gpu-$f.npy"
  done
  rm -f "$OUT"/attn-[qkv].npy
fi
# wheels [DIR]: the packages carried in DIR (default .whl/, git-ignored; .whl/flashinfer for
# the flashinfer step, so that it can be carried alone), installed once per DIR into $WP without
# their dependencies (torch and triton are on the machine); 1 when DIR holds none. A library
# whose import still fails is reported as unavailable by the step that wanted it.
WP=${TMPDIR:-/tmp}/lowp-wheels-py
wheels() {
  local d=${1:-$ROOT/.whl}
  ls "$d"/*.whl >/dev/null 2>&1 || return 1
  case " ${WHEELS_IN:-} " in *" $d "*) return 0 ;; esac
  WHEELS_IN="${WHEELS_IN:-} $d"
  say "wheels: $(ls "$d"/*.whl | wc -l), $(du -ch "$d"/*.whl | tail -1 | cut -f1) in ${d#"$ROOT"/}/ -> $WP"
  # one wheel a call, so that one refusal does not stop the others; a wheel pip refuses (its
  # tags name another Python, as sglang 0.5.23's cp311 one, reduced by tools/reduce_wheel.py)
  # is extracted by zipfile after every file is checked against its RECORD
  for w in "$d"/*.whl; do
    python3 -m pip install -q --no-deps --no-index --no-compile --upgrade --target "$WP" "$w" >>"$BLOG" 2>&1 && continue
    if python3 "$ROOT/tools/reduce_wheel.py" unpack "$w" --target "$WP" >>"$BLOG" 2>&1; then
      say "wheels: pip refused $(basename "$w"); unpacked by zipfile into $WP, each file checked against its RECORD"
    else say "wheels: $(basename "$w") not installed: pip refused it and its RECORD check failed (see build.log)"; fi
  done
  return 0
}
if want certify; then
  if [ -x "$LOWP" ] && [ -f "$B/ref/liblowp.so" ]; then
    # the budget leaves the script's own limit room for the summary
    cb=$(($(left) - 40)); [ $cb -gt 420 ] && cb=420
    WPP=${PYTHONPATH:-}; wheels && WPP="$WP${WPP:+:$WPP}" # for the sglang kernels
    run_step "certify_h200.py" $((cb + 30)) certify-h200.md env LOWP_LIBRARY="$B/ref/liblowp.so" PYTHONPATH="$WPP" python3 \
      tools/certify_h200.py --out "$OUT" --lowp "$LOWP" --budget-s "$cb" ${LOWP_CERTIFY_ARGS:-}
  else summ "certify_h200.py" "not built" 0 "lowp or liblowp.so missing; see build.log"; fi
fi
if want quantlib; then
  # The three libraries from the wheels in .whl/ (wheels above); one whose import fails is
  # reported as not installed by quantlib_check.py and the others run.
  QP=$WP
  if [ -f "$B/ref/liblowp.so" ] && wheels; then
    run_step "quantlib_check.py (cuda)" 240 quantlib-check-h200.md env LOWP_LIBRARY="$B/ref/liblowp.so" \
      PYTHONPATH="$QP" python3 tools/quantlib_check.py --device cuda --out "$OUT/quantlib-check-h200.md" $QUICK
    run_step "quantlib_check.py (cpu)" 180 quantlib-check-h200-cpu.md env LOWP_LIBRARY="$B/ref/liblowp.so" \
      PYTHONPATH="$QP" python3 tools/quantlib_check.py --device cpu --out "$OUT/quantlib-check-h200-cpu.md" $QUICK
  else summ "quantlib_check.py" "not run" 0 "liblowp.so or .whl/*.whl missing"; fi
fi
if want flashinfer; then
  # FlashInfer from .whl/flashinfer (tools/flashinfer_bundle.py; carry [".whl/flashinfer"]): the
  # reduced wheel and its pure-Python dependencies, and the two modules prebuilt for sm_90a when
  # the bundle has them (FlashInfer loads flashinfer/data/aot/<name>/<name>.so before it would
  # compile)
  FB=$ROOT/.whl/flashinfer
  if wheels "$FB" && [ -d "$WP/flashinfer" ]; then
    jit=240 # without prebuilt modules: 20 nvcc runs on the host's cores, timed in the .json
    if [ -d "$FB/flashinfer-aot" ]; then
      mkdir -p "$WP/flashinfer/data/aot" && cp -r "$FB/flashinfer-aot/." "$WP/flashinfer/data/aot/" && jit=30
    fi
    fb=$(($(left) - 40 - jit)); [ $fb -gt 300 ] && fb=300; [ $fb -lt 30 ] && fb=30 # the bench's budget after the JIT
    run_step "flashinfer_bench.py" $(($(left) - 10)) flashinfer-bench-h200.csv env PYTHONPATH="$WP${PYTHONPATH:+:$PYTHONPATH}" \
      FLASHINFER_WORKSPACE_BASE="${TMPDIR:-/tmp}/lowp-flashinfer-ws" python3 tools/flashinfer_bench.py \
      --out "$OUT/flashinfer-bench-h200.csv" --extend-out "$OUT/flashinfer-extend-bench-h200.csv" \
      --budget-s "$fb" ${LOWP_FLASHINFER_ARGS:-}
    # its certificates (issue #20): the same modules, head dim 128, through import lowp
    if [ "${LOWP_FLASHINFER_CERTIFY:-1}" = 0 ]; then
      summ "certify_h200.py (flashinfer)" "not run" 0 "LOWP_FLASHINFER_CERTIFY=0"
    elif [ -f "$B/ref/liblowp.so" ] && [ $(left) -gt 60 ]; then
      fc=$(($(left) - 30)); [ $fc -gt 240 ] && fc=240
      run_step "certify_h200.py (flashinfer)" $((fc + 20)) certify-h200-flashinfer.md env LOWP_LIBRARY="$B/ref/liblowp.so" \
        PYTHONPATH="$WP${PYTHONPATH:+:$PYTHONPATH}" FLASHINFER_WORKSPACE_BASE="${TMPDIR:-/tmp}/lowp-flashinfer-ws" \
        python3 tools/certify_h200.py --out "$OUT" --lowp "$LOWP" --kernels flashinfer-fp8,flashinfer-bf16 \
        --report certify-h200-flashinfer --budget-s "$fc"
    else summ "certify_h200.py (flashinfer)" "not run" 0 "liblowp.so missing or no time left"; fi
  else summ "flashinfer_bench.py" "not run" 0 "no flashinfer in .whl/flashinfer (tools/flashinfer_bundle.py)"; fi
fi
if want bench && [ -x "$LOWP" ]; then
  run_step "lowp gpu bench" 240 gpu-bench-h200.csv sh -c "'$LOWP' gpu bench --csv '$OUT/gpu-bench-h200.csv' ${LOWP_GPU_BENCH_ARGS:-} | tee '$OUT/gpu-bench-h200.txt'"
  run_step "sdpa_bench.py" 200 sdpa-bench-h200.csv python3 tools/sdpa_bench.py --out "$OUT/sdpa-bench-h200.csv" ${LOWP_SDPA_ARGS:-}
fi
if want prof && [ -x "$LOWP" ]; then
  # Nsight Compute on one decode launch per format (tools/gpu_prof.sh; PROF_FORMATS)
  run_step "gpu_prof.sh" 240 prof-*.csv bash tools/gpu_prof.sh "$LOWP" "$OUT" ${LOWP_GPU_PROF_ARGS:-}
fi
if [ -n "${LOWP_GPU_RUN_EXTRA:-}" ] && [ -x "$LOWP" ]; then
  # free-form measurements (benches at other split lengths, ring sizes...): a shell
  # command run with LOWP and OUT set, its output in $OUT/extra.txt
  run_step "extra" 300 extra.txt env LOWP="$LOWP" OUT="$OUT" sh -c "{ $LOWP_GPU_RUN_EXTRA; } > '$OUT/extra.txt' 2>&1"
fi
if want tune && [ -x "$LOWP" ]; then
  # a small sweep unless TUNE_* say otherwise (each point is one lowp gpu bench run)
  export TUNE_STAGES=${TUNE_STAGES:-2 3} TUNE_WARPS=${TUNE_WARPS:-4 2} TUNE_LAYOUTS=${TUNE_LAYOUTS:-nhd}
  run_step "gpu_tune.sh" 120 gpu-tune.txt sh -c "bash tools/gpu_tune.sh '$LOWP' > '$OUT/gpu-tune.txt' 2>&1"
fi

# ex2 before extend: it needs well under a minute, extend can use the rest of the budget
if want ex2; then
  if [ -x "$GPUB/lowp_gpu_ex2_probe" ]; then
    run_step "ex2 probe" 120 ex2-approx-h200.md "$GPUB/lowp_gpu_ex2_probe" "$OUT"
  else summ "ex2 probe" "not built" 0 "see build.log"; fi
fi
if want mpi && [ -x "$LOWP" ]; then
  # issue #23: gpu conform unsharded vs 2 MPI ranks on this machine's GPU(s), merged by
  # rank 0 and cmp'ed (tools/gpu_mpi.sh; Open MPI from the carried .deb/mpi)
  run_step "mpi: gpu conform 1 process vs 2 ranks" 420 mpi-h200.md bash tools/gpu_mpi.sh "$LOWP" "$OUT" \
    ${LOWP_GPU_MPI_ARGS:-}
fi

if want extend; then
  if [ -x "$LOWP" ]; then
    # shellcheck disable=SC2086 # the arguments are a list
    run_step "extend conform" "${LOWP_GPU_EXTEND_LIMIT:-300}" gpu-extend-conform-h200.md "$LOWP" gpu conform --kernel extend,prefill \
      --report "$OUT/gpu-extend-conform-h200.md" ${LOWP_GPU_EXTEND_ARGS---quick}
    # the workspace fill's staged kernel forced (LOWP_GPU_WS_FILL=staged; the default, auto,
    # takes it only above 2^24 prefix elements): the workspace cases again with it, short
    # prefixes included (layouts with interleaved scales keep the rows kernel)
    run_step "extend workspace, staged fill" 200 gpu-extend-ws-staged-h200.md env LOWP_GPU_WS_FILL=staged \
      "$LOWP" gpu conform --kernel extend --cases 1 --long 0 ${LOWP_GPU_WS_STAGED_ARGS:---ws 4000 --ws-long 1} \
      --report "$OUT/gpu-extend-ws-staged-h200.md"
    # one extend case and 16 workspace cases, with the staged fill (it keeps shared memory
    # a warp: racecheck's subject)
    for tool in memcheck racecheck; do
      sanitize extend $tool 120 extend env LOWP_GPU_WS_FILL=staged "$LOWP" gpu conform --kernel extend \
        --cases 1 --long 0 --ws 16 --ws-long 0 --report "$OUT/san-$tool-extend.md"
    done
    # the bench's own exit status (77 without a GPU), its table printed after it
    run_step "extend bench" 150 gpu-extend-bench-h200.csv sh -c "'$LOWP' gpu bench --kernel extend,prefill --csv '$OUT/gpu-extend-bench-h200.csv' ${LOWP_GPU_EXTEND_BENCH_ARGS:-} > '$OUT/gpu-extend-bench-h200.txt' 2>&1; r=\$?; cat '$OUT/gpu-extend-bench-h200.txt'; exit \$r"
    # the extends again with the rows fill forced, in the same call (its ws_us beside the
    # default's, auto; the attention columns measure the same kernel twice)
    run_step "extend bench, rows fill" 150 gpu-extend-bench-rows-h200.csv sh -c "LOWP_GPU_WS_FILL=rows '$LOWP' gpu bench --kernel extend --csv '$OUT/gpu-extend-bench-rows-h200.csv' ${LOWP_GPU_EXTEND_BENCH_ARGS:-} > '$OUT/gpu-extend-bench-rows-h200.txt' 2>&1; r=\$?; cat '$OUT/gpu-extend-bench-rows-h200.txt'; exit \$r"
  else summ "extend conform" "not built" 0 "see build.log"; fi
  if [ "${LOWP_GPU_EXTEND_SDPA:-1}" != 0 ]; then
    run_step "sdpa_extend_bench.py" 150 sdpa-extend-bench-h200.csv python3 tools/sdpa_extend_bench.py \
      --out "$OUT/sdpa-extend-bench-h200.csv"
  fi
  if [ -x "$LOWP" ]; then
    # lowp gpu attn --path extend|prefill on the GPU vs --emulate (byte for byte), both
    # checked against lowp attn --path ... within the bound
    python3 - "$OUT" <<'PYEOF'
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(20261201)
np.save(out + "/ext-q.npy", rng.standard_normal((300, 32, 128)).astype(np.float32))
np.save(out + "/ext-k.npy", rng.standard_normal((2000, 8, 128)).astype(np.float32))
np.save(out + "/ext-v.npy", rng.standard_normal((2000, 8, 128)).astype(np.float32))
PYEOF
    for p in extend prefill; do
      t=$(date +%s)
      if [ ! -f "$OUT/ext-v.npy" ]; then summ "gpu attn --path $p vs --emulate" "not run" 0 "no inputs (numpy)"; continue; fi
      IN="--q $OUT/ext-q.npy --k $OUT/ext-k.npy --v $OUT/ext-v.npy --kv-format nvfp4"
      "$LOWP" attn $IN --path $p --out "$OUT/ext-attn-$p.npy" > "$OUT/ext-attn-$p.txt" 2>&1
      "$LOWP" gpu attn --path $p $IN --out "$OUT/ext-gpu-$p.npy" --check-against "$OUT/ext-attn-$p.npy" > "$OUT/ext-gpu-$p.txt" 2>&1
      r1=$?
      "$LOWP" gpu attn --path $p $IN --emulate --out "$OUT/ext-emu-$p.npy" > "$OUT/ext-emu-$p.txt" 2>&1
      if [ $r1 = 77 ]; then st="skipped (no GPU)"
      else
        if cmp -s "$OUT/ext-gpu-$p.npy" "$OUT/ext-emu-$p.npy"; then st=identical; else st=DIFFERENT; fi
        [ $r1 = 0 ] || st="$st, bound FAIL rc=$r1"
      fi
      summ "gpu attn --path $p vs --emulate" "$st" $(($(date +%s) - t)) "ext-gpu-$p.txt"
    done
    # the outputs (about 5 MB each) were compared above; the .txt files keep what they said.
    # Leaving them would push the results archive past what the device tool returns.
    rm -f "$OUT"/ext-[qkv].npy "$OUT"/ext-attn-*.npy "$OUT"/ext-gpu-*.npy "$OUT"/ext-emu-*.npy
  fi
fi
if want select; then
  SC=$GPUB/lowp_gpu_select_check
  if [ -x "$SC" ]; then
    # the check and the timings, leaving about 90 s for the two sanitizer runs
    sb=$(($(left) - 100)); [ $sb -lt 30 ] && sb=30
    run_step "select check + timings" $((sb + 30)) select-gpu-h200.md "$SC" "$OUT/select-gpu-h200.md" \
      ${LOWP_GPU_SELECT_ARGS:---bench --budget-s $sb} $QUICK
    for tool in memcheck racecheck; do
      sanitize select $tool 60 select "$SC" "$OUT/san-$tool-select.md" --cases 6 --sparse-cases 3 --max-ctx 300
    done
  else summ "select check" "not built" 0 "see build.log"; fi
fi
if want mma; then
  if [ -x "$GPUB/lowp_gpu_mma_probe" ]; then
    run_step "mma probe" 120 gpu-mma-probe-h200.md "$GPUB/lowp_gpu_mma_probe" "$OUT/gpu-mma-probe-h200.md"
  else summ "mma probe" "not built" 0 "see build.log"; fi
fi
if want kvwrite; then
  if [ -x "$GPUB/lowp_gpu_kv_write_check" ]; then
    run_step "kv write check" 150 gpu-kv-write-h200.md "$GPUB/lowp_gpu_kv_write_check" "$OUT/gpu-kv-write-h200.md" $QUICK
    # wide shares forced (the check's small cases take narrow ones: gpu/kernels/kv_write.cu)
    run_step "kv write check (wide shares)" 150 gpu-kv-write-wide-h200.md env LOWP_GPU_KV_WRITE_SHARE=wide \
      "$GPUB/lowp_gpu_kv_write_check" "$OUT/gpu-kv-write-wide-h200.md" $QUICK
  else summ "kv write check" "not built" 0 "see build.log"; fi
  if [ -x "$LOWP" ]; then
    # the kernel's bench over tokens 1..32K x head dims 64..512 x formats (its exit status,
    # the table printed after it)
    run_step "kv write bench" 150 gpu-kv-write-bench-h200.csv sh -c "'$LOWP' gpu bench --kernel kv-write --csv '$OUT/gpu-kv-write-bench-h200.csv' ${LOWP_GPU_KVW_BENCH_ARGS:-} > '$OUT/gpu-kv-write-bench-h200.txt' 2>&1; r=\$?; cat '$OUT/gpu-kv-write-bench-h200.txt'; exit \$r"
  fi
fi

# ---------------------------------------------------------------- summary
rm -f "$OUT"/*.tmp 2>/dev/null
echo
echo "================ lowp gpu_run summary ($(el)s in all) ================"
printf '%-38s %-22s %6s  %s\n' step result seconds report
for i in "${!SUM_STEP[@]}"; do
  printf '%-38s %-22s %6s  %s\n' "${SUM_STEP[$i]}" "${SUM_STATUS[$i]}" "${SUM_TIME[$i]}" "${SUM_NOTE[$i]}"
done
if [ -f "$OUT/gpu-cvt-h200.md" ]; then
  echo "--- gpu-cvt-h200.md (check | inputs | mismatches | result)"
  grep -E '^\| (e[0-9]|bf16|f16|encode)' "$OUT/gpu-cvt-h200.md" |
    awk -F'|' '{printf "  %-64s|%s|%s|%s\n", $2, $3, $4, substr($(NF-1), 1, 60)}'
fi
if [ -f "$OUT/torch-check.md" ]; then
  echo "--- torch-check.md (comparison | inputs | mismatches | result)"
  grep -E '^\| (lowp [a-z_]+ vs|torch CUDA vs)' "$OUT/torch-check.md" |
    awk -F'|' '{printf "  %-48s|%s|%s|%s\n", $2, $3, $4, $(NF-2)}'
fi
echo "files in OUT: $(ls "$OUT" | tr '\n' ' ')"
# The device tool returns only a few files: everything but this log goes into one archive.
# The ex2 probe's three files (8 MiB int8 grids, its report) come back as files.
( cd "$OUT" && ls | grep -v -e '^gpu-run.log$' -e '^lowp-gpu-results.tgz$' \
    -e '^ex2_err_0_1\.i8$' -e '^ex2_err_m1_0\.i8$' -e '^ex2-approx-h200\.md$' > .list &&
  tar czf lowp-gpu-results.tgz -T .list && xargs rm -f < .list; rm -f .list )
# exit status: 0 when every step passed (or was skipped for want of a GPU / torch), else 1
for st in "${SUM_STATUS[@]}"; do
  case $st in ok | pass | identical | skipped*) ;; *) return 1 ;; esac
done
return 0
}

main "$@" 2>&1 | tee "$LOG"
