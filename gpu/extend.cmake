# gpu/extend.cmake: the extend / prefill attention kernel over an FP8 workspace
# (lowp/gpu_extend.h), its conformance run and its bench. Included by gpu/CMakeLists.txt.
#   lowp_gpu_extend          static library: kernels/extend.cu
#   lowp_gpu_extend_conform  static library: check/extend_check.c (the conformance run) and
#                            bench/extend_bench.c (the bench), linked into lowp (tools/)
# The emulator (ref/attn/src/attn_gpu_extend.c) reproduces the kernel only if nothing is
# contracted (--fmad=false), division is IEEE and nothing is flushed: the decode's flags.
add_library(lowp_gpu_extend STATIC ${LOWP_GPU_DIR}/kernels/extend.cu)
set_target_properties(lowp_gpu_extend PROPERTIES
  CUDA_ARCHITECTURES "${LOWP_GPU_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_compile_options(lowp_gpu_extend PRIVATE ${LOWP_GPU_EXACT_CUDA_FLAGS})
target_include_directories(lowp_gpu_extend PUBLIC ${LOWP_GPU_DIR}/include)
target_link_libraries(lowp_gpu_extend PUBLIC lowp_gpu_kv lowp_static CUDA::cudart_static PRIVATE m)

# The conformance run and the bench of the kernel (lowp/gpu_extend_conform.h), behind
# `lowp gpu conform --kernel extend|prefill` and `lowp gpu bench --kernel extend|prefill`.
add_library(lowp_gpu_extend_conform STATIC ${LOWP_GPU_DIR}/check/extend_check.c
            ${LOWP_GPU_DIR}/bench/extend_bench.c)
target_compile_options(lowp_gpu_extend_conform PRIVATE ${LOWP_WARNINGS} -O2)
target_link_libraries(lowp_gpu_extend_conform PUBLIC lowp_gpu_extend PRIVATE lowp_gpu_kv_bench OpenMP::OpenMP_C m)
# tests/lib/lowp_test_base.h: the random draws of the tests (no Check)
target_include_directories(lowp_gpu_extend_conform PRIVATE ${PROJECT_SOURCE_DIR}/tests/lib)
add_test(NAME gpu_extend
         COMMAND lowp_cli gpu conform --kernel extend,prefill --quick
                 --report ${CMAKE_CURRENT_BINARY_DIR}/gpu-extend-report.md)
set_tests_properties(gpu_extend PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800)
# The workspace cases again with the fill's staged kernel (LOWP_GPU_WS_FILL=staged).
add_test(NAME gpu_extend_ws_staged
         COMMAND lowp_cli gpu conform --kernel extend --cases 1 --long 0 --ws 400 --ws-long 1
                 --report ${CMAKE_CURRENT_BINARY_DIR}/gpu-extend-ws-staged-report.md)
set_tests_properties(gpu_extend_ws_staged PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800
                     ENVIRONMENT LOWP_GPU_WS_FILL=staged)
# Any machine: the emulator against binary64 attention within the derived bound, on the
# same random and adversarial cases (the GPU comparison is skipped), and the workspace
# fill's block function run on the host against lowp_kv_path_run(EXTEND).
add_test(NAME gpu_extend_emulator
         COMMAND lowp_cli gpu conform --kernel extend,prefill --emulator-only --cases 150
                 --long 0 --ws 100 --ws-long 1
                 --report ${CMAKE_CURRENT_BINARY_DIR}/gpu-extend-emulator.md)
set_tests_properties(gpu_extend_emulator PROPERTIES LABELS quick TIMEOUT 600)
# The staged fill's schedule on the host (LOWP_GPU_WS_FILL=staged: its units, chunk copies
# into a stage and block function, gpu/kernels/extend.cu) against lowp_kv_path_run(EXTEND).
add_test(NAME gpu_extend_emulator_staged
         COMMAND lowp_cli gpu conform --kernel extend --emulator-only --cases 1 --long 0
                 --ws 100 --ws-long 0
                 --report ${CMAKE_CURRENT_BINARY_DIR}/gpu-extend-emulator-staged.md)
set_tests_properties(gpu_extend_emulator_staged PROPERTIES LABELS quick TIMEOUT 600
                     ENVIRONMENT LOWP_GPU_WS_FILL=staged)

# Blackwell builds of the kernel: compiled (the library's CUDA_ARCHITECTURES), never run.
