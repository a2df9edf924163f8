# gpu/sass.cmake: SASS inspection tests. They read the machine code nvcc produced (through
# tools/sass_check.sh, i.e. cuobjdump -sass) and check that a given instruction is there,
# or is not, for one architecture: no GPU is needed. They run in ctest's quick tier and exit
# 77 (skipped) only when no cuobjdump with nvdisasm can be found; tools/setup.sh installs
# both into .venv from PyPI. The object files must be built first (cmake --build).
#
# To check another kernel, add a line at the bottom of this file, e.g.
#
#   lowp_sass_test(NAME sass_decode_nvfp4_sm100a TARGET lowp_decode SOURCE decode.cu
#                  ARCH sm_100a INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "decode_nvfp4")
#
#   NAME         the ctest name
#   TARGET       a target that compiles SOURCE (a library or an executable); it may be
#                defined in any gpu/*.cmake part: the test is added at the end of gpu/
#   SOURCE       one of TARGET's sources (relative to TARGET's source directory, or
#                absolute): its object file is checked. Without SOURCE the target's
#                output file (.a, executable) is checked as a whole.
#   ARCH         sm_100a / 100a; must be one of TARGET's CUDA_ARCHITECTURES (if not, the
#                test is added DISABLED, with a message)
#   INSTRUCTION  a SASS opcode with modifiers; longer opcodes with more .MODIFIERS match too
#   FUNCTION     optional extended regex on the mangled or demangled kernel name
#                (grep -E syntax; no ';')
#   ABSENT       the instruction must NOT occur (a negative control)
#   LABELS       ctest labels (default: quick)
#
# gpu/CMakeLists.txt includes this file before the parts that call lowp_sass_test
# (it runs once: include_guard).
include_guard(GLOBAL)

get_filename_component(LOWP_SASS_CHECK "${CMAKE_CURRENT_LIST_DIR}/../tools/sass_check.sh" ABSOLUTE)
set(LOWP_CUOBJDUMP "" CACHE FILEPATH
    "cuobjdump for the sass_* tests (empty: tools/sass_check.sh searches $LOWP_CUOBJDUMP, PATH, /usr/local/cuda/bin, .venv)")

function(lowp_sass_test)
  cmake_parse_arguments(PARSE_ARGV 0 arg "ABSENT" "NAME;TARGET;SOURCE;ARCH;INSTRUCTION;FUNCTION"
                        "LABELS")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "lowp_sass_test: unexpected arguments: ${arg_UNPARSED_ARGUMENTS}")
  endif()
  foreach(req NAME TARGET ARCH INSTRUCTION)
    if(NOT arg_${req})
      message(FATAL_ERROR "lowp_sass_test(${arg_NAME}): ${req} is required")
    endif()
  endforeach()
  string(REPLACE "\\;" ";" arg_LABELS "${arg_LABELS}")  # LABELS "a;b" as well as LABELS a b
  if(NOT arg_LABELS)
    set(arg_LABELS quick)
  endif()
  if(arg_FUNCTION MATCHES ";")
    message(FATAL_ERROR "lowp_sass_test(${arg_NAME}): FUNCTION may not contain ';'")
  endif()
  # Deferred to the end of this directory, so that TARGET may come from any gpu/*.cmake
  # part. Bracket arguments keep the values literal (no second ${} expansion).
  set(call "_lowp_sass_test_add")
  foreach(v NAME TARGET SOURCE ARCH INSTRUCTION FUNCTION ABSENT)
    string(APPEND call " [==[${arg_${v}}]==]")
  endforeach()
  string(REPLACE ";" "," labels "${arg_LABELS}")
  string(APPEND call " [==[${labels}]==]")
  cmake_language(EVAL CODE "cmake_language(DEFER CALL ${call})")
endfunction()

function(_lowp_sass_test_add name tgt src arch instr fregex absent labels)
  string(REPLACE "," ";" labels "${labels}")
  if(NOT TARGET ${tgt})
    message(FATAL_ERROR "lowp_sass_test(${name}): no target ${tgt}")
  endif()
  string(REGEX REPLACE "^sm_?" "" num "${arch}")
  if(NOT num MATCHES "^[0-9]+[a-z]?$")
    message(FATAL_ERROR "lowp_sass_test(${name}): ARCH ${arch} is not of the form sm_100a")
  endif()

  # Is there SASS for this architecture? (entries such as 100a, 100a-real; not -virtual)
  set(disabled FALSE)
  get_target_property(archs ${tgt} CUDA_ARCHITECTURES)
  if(archs AND NOT archs MATCHES "^(all|all-major|native)$")
    set(sass_archs "")
    foreach(a IN LISTS archs)
      if(NOT a MATCHES "-virtual$")
        string(REGEX REPLACE "-real$" "" a "${a}")
        list(APPEND sass_archs "${a}")
      endif()
    endforeach()
    if(NOT num IN_LIST sass_archs)
      message(STATUS "lowp: test ${name} disabled: ${tgt} is not built for sm_${num} (CUDA_ARCHITECTURES ${archs})")
      set(disabled TRUE)
    endif()
  endif()

  if(src)
    # The object file of SOURCE among $<TARGET_OBJECTS:tgt>: CMake names it after the
    # source's path below the target's directory plus .o (.obj on Windows); match the
    # file name alone when no other source of the target shares it.
    get_target_property(srcs ${tgt} SOURCES)
    get_target_property(sdir ${tgt} SOURCE_DIR)
    get_filename_component(want "${src}" ABSOLUTE BASE_DIR "${sdir}")
    get_filename_component(base "${want}" NAME)
    set(found FALSE)
    set(same_name 0)
    foreach(s IN LISTS srcs)
      if(s MATCHES "^\\$<")
        continue()
      endif()
      get_filename_component(abs "${s}" ABSOLUTE BASE_DIR "${sdir}")
      get_filename_component(b "${abs}" NAME)
      if(abs STREQUAL want)
        set(found TRUE)
      endif()
      if(b STREQUAL base)
        math(EXPR same_name "${same_name} + 1")
      endif()
    endforeach()
    if(NOT found)
      message(FATAL_ERROR "lowp_sass_test(${name}): ${src} is not a source of ${tgt} (${srcs})")
    endif()
    if(same_name GREATER 1)
      file(RELATIVE_PATH key "${sdir}" "${want}")
      set(lead "/")
    else()
      set(key "${base}")
      set(lead "(^|/)")
    endif()
    string(REGEX REPLACE "([][.+*?^$()|\\\\])" "\\\\\\1" key "${key}")
    set(file "$<FILTER:$<TARGET_OBJECTS:${tgt}>,INCLUDE,${lead}${key}\\.o(bj)?$>")
  else()
    set(file "$<TARGET_FILE:${tgt}>")
  endif()

  set(opts "")
  if(LOWP_CUOBJDUMP)
    list(APPEND opts --cuobjdump "${LOWP_CUOBJDUMP}")
  endif()
  if(absent)
    list(APPEND opts --absent)
  endif()
  add_test(NAME ${name} COMMAND ${LOWP_SASS_CHECK} ${opts} "${file}" "sm_${num}" "${instr}" ${fregex})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77 TIMEOUT 300
                                          DISABLED ${disabled})
endfunction()

# ---------------------------------------------------------------- the tests
# Blackwell E2M1 decode: cvt.rn.f16x2.e2m1x2 must be the hardware F2FP...UNPACK_B in the
# family-specific images (gpu/kernels/cvt.cu, k_decode<LOWP_E2M1>; FUNCTION matches every
# k_decode instance, so a change of the enum's value cannot make the check vacuous).
lowp_sass_test(NAME sass_e2m1_sm100a TARGET lowp_gpu SOURCE kernels/cvt.cu ARCH sm_100a
               INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "k_decode")
lowp_sass_test(NAME sass_e2m1_sm120a TARGET lowp_gpu SOURCE kernels/cvt.cu ARCH sm_120a
               INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "k_decode")
# Negative control: sm_90 has no E2M1 cvt (its k_decode<LOWP_E2M1> is a stub), so the
# instruction must be absent there: proves the check can fail and reads the right image.
lowp_sass_test(NAME sass_e2m1_sm90_absent TARGET lowp_gpu SOURCE kernels/cvt.cu ARCH sm_90
               INSTRUCTION F2FP.F16.E2M1.UNPACK_B FUNCTION "k_decode" ABSENT)
