# gpu/kv_write.cmake: quantize-on-write into a paged GPU KV cache (issue #5 part 1).
# Included by gpu/CMakeLists.txt, so nvcc and CUDAToolkit exist.
#   lowp_gpu_kv                static library: lowp/gpu_kvcache.h (cache storage, write
#                              kernels, host emulation of the kernels)
#   lowp_gpu_kv_bench          static library: bench/kv_write_bench.cu (lowp/gpu_kv_bench.h)
#   lowp_gpu_kv_write_check    the byte-for-byte check against lowp_kvcache_write; exits 77
#                              without a GPU (unless --host-only)
add_library(lowp_gpu_kv STATIC
  ${CMAKE_CURRENT_LIST_DIR}/kernels/kvcache_gpu.cu
  ${CMAKE_CURRENT_LIST_DIR}/kernels/kv_write.cu)
set_target_properties(lowp_gpu_kv PROPERTIES
  CUDA_ARCHITECTURES "${LOWP_GPU_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_include_directories(lowp_gpu_kv PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
# Bit-exactness with the CPU model (gpu/kernels/kv_write.cu): no contraction of a*b+c on the device
# (--fmad=false) or the host (-ffp-contract=off, the lowp library's own flag), IEEE
# division and no flush to zero (nvcc's defaults, stated so a global flag cannot change them).
target_compile_options(lowp_gpu_kv PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--threads=0 --fmad=false -prec-div=true -prec-sqrt=true -ftz=false
    -Xcompiler=-Wall,-Wextra,-ffp-contract=off -O3>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${LOWP_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>)
target_link_libraries(lowp_gpu_kv PUBLIC lowp_static CUDA::cudart_static)

# The kernel's bench (`lowp gpu bench --kernel kv-write`) and the benches' device-time
# helper lowp_gpu_spin_us (lowp/gpu_kv_bench.h), linked into lowp (tools/).
add_library(lowp_gpu_kv_bench STATIC ${CMAKE_CURRENT_LIST_DIR}/bench/kv_write_bench.cu)
set_target_properties(lowp_gpu_kv_bench PROPERTIES
  CUDA_ARCHITECTURES "${LOWP_GPU_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_include_directories(lowp_gpu_kv_bench PUBLIC ${CMAKE_CURRENT_LIST_DIR}/bench/include)
target_compile_options(lowp_gpu_kv_bench PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--threads=0 -Xcompiler=-Wall,-Wextra -O3>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${LOWP_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>)
target_link_libraries(lowp_gpu_kv_bench PUBLIC lowp_gpu_kv)

add_executable(lowp_gpu_kv_write_check ${CMAKE_CURRENT_LIST_DIR}/check/kv_write_check.c)
target_compile_options(lowp_gpu_kv_write_check PRIVATE ${LOWP_WARNINGS} -O2)
target_link_libraries(lowp_gpu_kv_write_check PRIVATE lowp_gpu_kv lowp_cli_parse OpenMP::OpenMP_C)
# The static library holds C++ (nvcc host) objects: link with the C++ driver.
set_target_properties(lowp_gpu_kv_write_check PROPERTIES LINKER_LANGUAGE CXX)

# ctest: label gpu, exit 77 = skipped (no GPU). The full run: >= 10^5 cases per format.
add_test(NAME gpu_kv_write
         COMMAND lowp_gpu_kv_write_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-kv-write-report.md)
set_tests_properties(gpu_kv_write PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800)
# Without a GPU: the kernels' own code run on the CPU (lowp_gpu_kv_write_emulate) against
# lowp_kvcache_write on 500 cases per format (a few seconds), so CI catches logic errors.
add_test(NAME gpu_kv_write_emulate
         COMMAND lowp_gpu_kv_write_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-kv-write-emulate-report.md
                 --host-only --cases 500)
set_tests_properties(gpu_kv_write_emulate PROPERTIES LABELS quick TIMEOUT 300)
# The same with wide shares forced (one thread a block: what long writes take on the GPU).
add_test(NAME gpu_kv_write_emulate_wide
         COMMAND lowp_gpu_kv_write_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-kv-write-emulate-wide.md
                 --host-only --cases 500)
set_tests_properties(gpu_kv_write_emulate_wide PROPERTIES LABELS quick TIMEOUT 300
                     ENVIRONMENT LOWP_GPU_KV_WRITE_SHARE=wide)
# The GPU check with wide shares forced (its small cases take narrow ones by default).
add_test(NAME gpu_kv_write_wide
         COMMAND lowp_gpu_kv_write_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-kv-write-wide-report.md)
set_tests_properties(gpu_kv_write_wide PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800
                     ENVIRONMENT LOWP_GPU_KV_WRITE_SHARE=wide)
