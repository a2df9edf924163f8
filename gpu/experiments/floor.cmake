# gpu/experiments/floor.cmake: lowp_gpu_floor (gpu/experiments/floor.cu), what the work of an exact NVFP4 decode
# costs on the GPU it runs on (kernels that do part of the work, timed beside a streaming
# read). A measurement program, not a test: tools/gpu_floor.sh runs it on the H200.
# Included by gpu/CMakeLists.txt only with -DLOWP_GPU_EXPERIMENTS=ON. Builds without a GPU; exits 77 when
# it finds none.
#   lowp_gpu_floor [--batch B] [--ctx L] [--reps N] [--chunk C]
find_package(CUDAToolkit REQUIRED)

add_executable(lowp_gpu_floor ${CMAKE_CURRENT_LIST_DIR}/floor.cu)
# Its numbers are the H200's (sm_90): build exactly that image.
set_target_properties(lowp_gpu_floor PROPERTIES
  CUDA_ARCHITECTURES 90
  CUDA_STANDARD 17
  CUDA_STANDARD_REQUIRED ON)
target_include_directories(lowp_gpu_floor PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../kernels
                                                  ${PROJECT_SOURCE_DIR}/ref/hw/include)
# --fmad=false as gpu/decode.cmake: the same instruction mix as the decode kernels
target_compile_options(lowp_gpu_floor PRIVATE -O3 --fmad=false --threads=0
  -Xcompiler=-Wall,-Wextra
  $<$<BOOL:${LOWP_WERROR}>:-Werror=all-warnings -Xcompiler=-Werror>)
target_link_libraries(lowp_gpu_floor PRIVATE CUDA::cudart_static)
