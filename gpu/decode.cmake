# gpu/decode.cmake: the paged decode attention kernels (lowp/gpu_decode.h), their
# conformance harness and their benchmark. Included by gpu/CMakeLists.txt.
#   lowp_gpu_decode          static library: kernels/decode.cu (split kernel + merge kernel)
#   lowp_gpu_conform         static library: check/conform.c, the kernel against its CPU
#                            emulator and the binary64 reference (lowp/gpu_conform.h)
#   lowp_gpu_bench           static library: bench/bench.cu and bench/sm_clock.c (the bench's
#                            SM clock sampler) (lowp/gpu_bench.h)
#   lowp_gpu_decode_check    the conformance program; exits 77 without a GPU
set(LOWP_GPU_DIR ${CMAKE_CURRENT_LIST_DIR})
# The emulator (ref/attn/src/attn_gpu_emul.c) reproduces these kernels only if nothing is
# contracted (--fmad=false), division is IEEE and nothing is flushed to zero.
set(LOWP_GPU_EXACT_CUDA_FLAGS
  $<$<COMPILE_LANGUAGE:CUDA>:--threads=0 --fmad=false -prec-div=true -prec-sqrt=true -ftz=false
    -Xcompiler=-Wall,-Wextra,-ffp-contract=off -O3 -lineinfo>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${LOWP_WERROR}>>:-Werror=all-warnings -Xcompiler=-Werror>
  $<$<COMPILE_LANGUAGE:C>:${LOWP_WARNINGS} -O2>)
find_package(Threads REQUIRED)
foreach(lib IN ITEMS decode bench)
  if(lib STREQUAL "decode")
    add_library(lowp_gpu_decode STATIC ${LOWP_GPU_DIR}/kernels/decode.cu)
  else()
    add_library(lowp_gpu_bench STATIC ${LOWP_GPU_DIR}/bench/bench.cu ${LOWP_GPU_DIR}/bench/sm_clock.c)
  endif()
  set_target_properties(lowp_gpu_${lib} PROPERTIES
    CUDA_ARCHITECTURES "${LOWP_GPU_CUDA_ARCHITECTURES}"
    CUDA_STANDARD 17
    CUDA_STANDARD_REQUIRED ON)
  target_compile_options(lowp_gpu_${lib} PRIVATE ${LOWP_GPU_EXACT_CUDA_FLAGS})
endforeach()
target_include_directories(lowp_gpu_decode PUBLIC ${LOWP_GPU_DIR}/include)
target_link_libraries(lowp_gpu_decode PUBLIC lowp_gpu_kv lowp_static CUDA::cudart_static
  PRIVATE OpenMP::OpenMP_C m)
# the bench times the kernel's variants through its private launch interface
# (kernels/decode_internal.h); sm_clock.c opens NVML with dlopen and samples it on a thread
target_include_directories(lowp_gpu_bench PUBLIC ${LOWP_GPU_DIR}/bench/include
                           PRIVATE ${LOWP_GPU_DIR}/kernels)
target_link_libraries(lowp_gpu_bench PUBLIC lowp_gpu_decode
  PRIVATE OpenMP::OpenMP_C m Threads::Threads ${CMAKE_DL_LIBS})

add_library(lowp_gpu_conform STATIC ${LOWP_GPU_DIR}/check/conform.c)
target_compile_options(lowp_gpu_conform PRIVATE ${LOWP_WARNINGS} -O2)
target_include_directories(lowp_gpu_conform PUBLIC ${LOWP_GPU_DIR}/check/include)
target_link_libraries(lowp_gpu_conform PUBLIC lowp_gpu_decode PRIVATE OpenMP::OpenMP_C m)

add_executable(lowp_gpu_decode_check ${LOWP_GPU_DIR}/check/decode_check.c)
target_compile_options(lowp_gpu_decode_check PRIVATE ${LOWP_WARNINGS} -O2)
target_link_libraries(lowp_gpu_decode_check PRIVATE lowp_gpu_conform lowp_cli_parse OpenMP::OpenMP_C)
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

# Blackwell: E2M1 is decoded by the hardware cvt (F2FP.F16.E2M1.UNPACK_B) in the NVFP4 and
# MXFP4 kernels; sm_90 uses byte permutes and must not contain it.
foreach(arch IN ITEMS sm_100a sm_120a)
  lowp_sass_test(NAME sass_decode_e2m1_${arch} TARGET lowp_gpu_decode SOURCE kernels/decode.cu
                 ARCH ${arch} INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "decode_split")
endforeach()
lowp_sass_test(NAME sass_decode_e2m1_sm90_absent TARGET lowp_gpu_decode SOURCE kernels/decode.cu
               ARCH sm_90 INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "decode_split" ABSENT)
