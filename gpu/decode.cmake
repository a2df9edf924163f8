# gpu/decode.cmake: the paged decode attention kernels (lowp/gpu_decode.h) and their
# conformance program. Included by gpu/CMakeLists.txt's gpu/*.cmake glob.
#   lowp_gpu_decode          static library: decode.cu (split kernel + merge kernel),
#                            conform.c, bench.cu and sm_clock.c (the bench's SM clock)
#   lowp_gpu_decode_check    kernel vs CPU emulator (bit for bit) and vs the binary64
#                            reference; exits 77 without a GPU
add_library(lowp_gpu_decode STATIC ${CMAKE_CURRENT_LIST_DIR}/decode.cu
  ${CMAKE_CURRENT_LIST_DIR}/conform.c ${CMAKE_CURRENT_LIST_DIR}/bench.cu
  ${CMAKE_CURRENT_LIST_DIR}/sm_clock.c)
set_target_properties(lowp_gpu_decode PROPERTIES
  CUDA_ARCHITECTURES "${LOWP_GPU_CUDA_ARCHITECTURES}"
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_include_directories(lowp_gpu_decode PUBLIC ${CMAKE_CURRENT_LIST_DIR}/include)
# ref/src/common: the library's private why.h (lowp_why_set), for the host code's refusals
target_include_directories(lowp_gpu_decode PRIVATE ${PROJECT_SOURCE_DIR}/ref/src/common)
# The emulator (ref/src/attn_gpu_emul.c) reproduces these kernels only if nothing is
# contracted (--fmad=false), division is IEEE and nothing is flushed to zero.
target_compile_options(lowp_gpu_decode PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--threads=0 --fmad=false -prec-div=true -prec-sqrt=true -ftz=false
    -Xcompiler=-Wall,-Wextra,-ffp-contract=off -O3 -lineinfo>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${LOWP_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>)
target_compile_options(lowp_gpu_decode PRIVATE $<$<COMPILE_LANGUAGE:C>:${LOWP_WARNINGS} -O2>)
# sm_clock.c opens NVML with dlopen and samples it on a thread
find_package(Threads REQUIRED)
target_link_libraries(lowp_gpu_decode PUBLIC lowp_gpu_kv lowp_static CUDA::cudart_static
  PRIVATE OpenMP::OpenMP_C m Threads::Threads ${CMAKE_DL_LIBS})

if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/decode_check.c)
  add_executable(lowp_gpu_decode_check ${CMAKE_CURRENT_LIST_DIR}/decode_check.c)
  target_compile_options(lowp_gpu_decode_check PRIVATE ${LOWP_WARNINGS} -O2)
  target_link_libraries(lowp_gpu_decode_check PRIVATE lowp_gpu_decode OpenMP::OpenMP_C)
  set_target_properties(lowp_gpu_decode_check PROPERTIES LINKER_LANGUAGE CXX)
  add_test(NAME gpu_decode
           COMMAND lowp_gpu_decode_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-decode-report.md --quick)
  set_tests_properties(gpu_decode PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800)
  # Any machine: the emulator against binary64 attention within the derived bound, on the
  # same random and adversarial configurations (the GPU comparison is skipped).
  add_test(NAME gpu_decode_emulator
           COMMAND lowp_gpu_decode_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-decode-emulator.md
                   --emulator-only --cases 100 --long 0)
  set_tests_properties(gpu_decode_emulator PROPERTIES LABELS quick TIMEOUT 600)
  add_test(NAME gpu_decode_emulator_full
           COMMAND lowp_gpu_decode_check ${CMAKE_CURRENT_BINARY_DIR}/gpu-decode-emulator-full.md
                   --emulator-only --cases 2000 --long 1 --max-ctx 32768)
  set_tests_properties(gpu_decode_emulator_full PROPERTIES LABELS full TIMEOUT 3600)
endif()

# Blackwell: E2M1 is decoded by the hardware cvt (F2FP.F16.E2M1.UNPACK_B) in the NVFP4 and
# MXFP4 kernels; sm_90 uses byte permutes and must not contain it.
include(${CMAKE_CURRENT_LIST_DIR}/sass.cmake)
foreach(arch IN ITEMS sm_100a sm_120a)
  lowp_sass_test(NAME sass_decode_e2m1_${arch} TARGET lowp_gpu_decode SOURCE decode.cu
                 ARCH ${arch} INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "decode_split")
endforeach()
lowp_sass_test(NAME sass_decode_e2m1_sm90_absent TARGET lowp_gpu_decode SOURCE decode.cu
               ARCH sm_90 INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "decode_split" ABSENT)
