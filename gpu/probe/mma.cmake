# gpu/probe/mma.cmake: lowp_gpu_mma_probe (gpu/probe/mma_probe.cu + gpu/probe/mma_probe_main.c), which runs
# mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 on hand-made probes and 10^7 random
# outputs and reports which parameters of lowp's model (lowp/mma.h) the hardware follows.
# Included by gpu/CMakeLists.txt. Builds without a GPU; exits 77 (skip)
# when it finds none.
#   lowp_gpu_mma_probe REPORT.md [--quick]
find_package(CUDAToolkit REQUIRED)

add_executable(lowp_gpu_mma_probe ${CMAKE_CURRENT_LIST_DIR}/mma_probe.cu
                                  ${CMAKE_CURRENT_LIST_DIR}/mma_probe_main.c)
# The model's record is the H200's (sm_90): build exactly that image (plus its PTX).
set_target_properties(lowp_gpu_mma_probe PROPERTIES
  CUDA_ARCHITECTURES 90
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON
  # the nvcc host object is C++: link with the C++ driver
  LINKER_LANGUAGE CXX)
target_compile_options(lowp_gpu_mma_probe PRIVATE
  $<$<COMPILE_LANGUAGE:C>:${LOWP_WARNINGS} -O2>
  $<$<COMPILE_LANGUAGE:CUDA>:-O3 --threads=0 -Xcompiler=-Wall,-Wextra>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${LOWP_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>)
target_link_libraries(lowp_gpu_mma_probe PRIVATE lowp_cli_parse lowp_static CUDA::cudart_static OpenMP::OpenMP_C)
# tests/lib/lowp_test_base.h: the input builders and draws tests/test_mma.c uses (no Check)
target_include_directories(lowp_gpu_mma_probe PRIVATE ${PROJECT_SOURCE_DIR}/tests/lib)

# ctest: label gpu, exit 77 = skipped (no GPU).
add_test(NAME gpu_mma
         COMMAND lowp_gpu_mma_probe ${CMAKE_CURRENT_BINARY_DIR}/gpu-mma-report.md)
set_tests_properties(gpu_mma PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600)
