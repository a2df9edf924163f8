# gpu/select.cmake: the sparse-selection kernels (lowp/gpu_select.h, issue #19 item 6) and
# their conformance program. Included by gpu/CMakeLists.txt.
#   lowp_gpu_select          static library: kernels/select.cu (QSA compression + quantize
#                            on write, QSA / DSA scoring, top-k with the index-list layout)
#   lowp_gpu_select_check    the kernels against the CPU models of lowp/select.h, and the
#                            sparse decode against the decode emulator over the token
#                            indirection; exits 77 without a GPU
# The same exactness flags as the decode (LOWP_GPU_EXACT_CUDA_FLAGS, gpu/decode.cmake).
add_library(lowp_gpu_select STATIC ${CMAKE_CURRENT_LIST_DIR}/kernels/select.cu)
set_target_properties(lowp_gpu_select PROPERTIES
  CUDA_ARCHITECTURES "${LOWP_GPU_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_compile_options(lowp_gpu_select PRIVATE ${LOWP_GPU_EXACT_CUDA_FLAGS})
target_include_directories(lowp_gpu_select PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
target_link_libraries(lowp_gpu_select PUBLIC lowp_gpu_kv lowp_static CUDA::cudart_static)

add_executable(lowp_gpu_select_check ${CMAKE_CURRENT_LIST_DIR}/check/select_check.c)
target_compile_options(lowp_gpu_select_check PRIVATE ${LOWP_WARNINGS} -O2)
target_include_directories(lowp_gpu_select_check PRIVATE ${CMAKE_CURRENT_LIST_DIR}/kernels)
target_link_libraries(lowp_gpu_select_check PRIVATE lowp_gpu_select lowp_gpu_decode lowp_cli_parse
  OpenMP::OpenMP_C m)
set_target_properties(lowp_gpu_select_check PROPERTIES LINKER_LANGUAGE CXX)
# ctest: label gpu, exit 77 = skipped (no GPU): the quick mode (< 60 s on the H200)
add_test(NAME gpu_select
         COMMAND lowp_gpu_select_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-select-report.md --quick)
set_tests_properties(gpu_select PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800)
