# gpu/probe/rcp.cmake: lowp_gpu_rcp_probe (source gpu/probe/rcp_probe.cu), which measures rcp.approx.ftz.f32
# on the GPU, regenerates lowp's correction table (ref/block/data/rcp_approx_sm90.bin) and
# compares it and lowp_rcp_approx_ftz with the hardware on all 2^32 inputs.
# Included by gpu/CMakeLists.txt; builds without a GPU, exits 77
# (skip) when it finds none.
#   lowp_gpu_rcp_probe OUTDIR                      -> OUTDIR/rcp_approx_sm90.bin, rcp-approx-h200.md
#   lowp_gpu_rcp_probe --encode-u32 IN.u32 OUT.bin (CPU only: shared list -> lowp table)
find_package(CUDAToolkit REQUIRED)

add_executable(lowp_gpu_rcp_probe ${CMAKE_CURRENT_LIST_DIR}/rcp_probe.cu)
# The table is the H200's (sm_90): build exactly that image (plus its PTX).
set_target_properties(lowp_gpu_rcp_probe PROPERTIES
  CUDA_ARCHITECTURES 90
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_compile_options(lowp_gpu_rcp_probe PRIVATE
  -O3 --threads=0 -Xcompiler=-Wall,-Wextra
  $<$<BOOL:${LOWP_WERROR}>:-Werror=all-warnings -Xcompiler=-Werror>)
target_link_libraries(lowp_gpu_rcp_probe PRIVATE lowp_static CUDA::cudart_static)
# rcp_table.h: the table format the probe must write (a private lowp header, host code)
target_include_directories(lowp_gpu_rcp_probe PRIVATE ${PROJECT_SOURCE_DIR}/ref/block/internal)
# tests/lib/lowp_test_rcp.h: the model's bits and RN(1/x), as tests/test_rcp_approx.c has them
target_include_directories(lowp_gpu_rcp_probe PRIVATE ${PROJECT_SOURCE_DIR}/tests/lib)

add_test(NAME gpu_rcp COMMAND lowp_gpu_rcp_probe ${CMAKE_CURRENT_BINARY_DIR}/rcp-out)
set_tests_properties(gpu_rcp PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800)
