# gpu/probe/ex2.cmake: lowp_gpu_ex2_probe (source gpu/probe/ex2_probe.cu), which measures
# ex2.approx.ftz.f32 on the GPU on all 2^32 inputs and writes the facts a bit-exact model
# of it needs (issue #22 item 3): the scaling hypothesis per binade, the special inputs,
# the error of every k 2^-23 in [0, 1) and -1 + k 2^-23 in [-1, 0) as int8 files, and the
# model of ref/hw/include/lowp/ex2_approx.h against the hardware on all 2^32 inputs.
# Included by gpu/CMakeLists.txt; builds without a GPU, exits 77 (skip) when it finds none.
#   lowp_gpu_ex2_probe OUTDIR   -> OUTDIR/ex2_err_0_1.i8, ex2_err_m1_0.i8, ex2_approx_sm90.bin,
#                                  ex2-approx-h200.md
find_package(CUDAToolkit REQUIRED)

add_executable(lowp_gpu_ex2_probe ${CMAKE_CURRENT_LIST_DIR}/ex2_probe.cu)
# The instruction measured is the H200's (sm_90): build exactly that image (plus its PTX).
# No --use_fast_math: the probe's own floor, subtraction and binary64 exp2 must be exact /
# IEEE; only the measured instruction flushes.
set_target_properties(lowp_gpu_ex2_probe PROPERTIES
  CUDA_ARCHITECTURES 90
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_compile_options(lowp_gpu_ex2_probe PRIVATE
  -O3 --threads=0 -ftz=false -prec-div=true -Xcompiler=-Wall,-Wextra
  $<$<BOOL:${LOWP_WERROR}>:-Werror=all-warnings -Xcompiler=-Werror>)
# lowp_static: lowp's table of g (ref/hw/src/ex2_approx.c) and the table encoder
# (lowp/corr_table.h) it checks and regenerates
target_link_libraries(lowp_gpu_ex2_probe PRIVATE lowp_static CUDA::cudart_static)
# the model it compares with the hardware (__host__ __device__ under nvcc), the table format
target_include_directories(lowp_gpu_ex2_probe PRIVATE ${PROJECT_SOURCE_DIR}/ref/hw/include
                                                      ${PROJECT_SOURCE_DIR}/ref/common/include)

add_test(NAME gpu_ex2 COMMAND lowp_gpu_ex2_probe ${CMAKE_CURRENT_BINARY_DIR}/ex2-out)
set_tests_properties(gpu_ex2 PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
