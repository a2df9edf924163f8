# ref/block/rcp_table.cmake: embed the measured rcp.approx.ftz.f32 correction table
# (data/rcp_approx_sm90.bin, format in src/rcp_approx.c) into lowp and lowp_static.
# Included from ref/CMakeLists.txt after the block layer's object library exists. src/rcp_table.S pulls the file in with .incbin, so:
#   - the path reaches the assembler as LOWP_RCP_TABLE_PATH (a string literal), and
#   - OBJECT_DEPENDS re-assembles it when the .bin changes (.incbin is invisible to the
#     preprocessor's dependency scan).
# GNU as / ELF only, like the rest of the build (Linux).
enable_language(ASM)
set(LOWP_RCP_TABLE_BIN ${CMAKE_CURRENT_LIST_DIR}/data/rcp_approx_sm90.bin)
if(NOT EXISTS ${LOWP_RCP_TABLE_BIN})
  message(FATAL_ERROR "lowp: ${LOWP_RCP_TABLE_BIN} is missing (regenerate it with "
                      "lowp_gpu_rcp_probe, see gpu/probe/rcp_probe.cu)")
endif()
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/src/rcp_table.S PROPERTIES
  LANGUAGE ASM
  OBJECT_DEPENDS ${LOWP_RCP_TABLE_BIN})
target_sources(lowp_block PRIVATE ${CMAKE_CURRENT_LIST_DIR}/src/rcp_table.S)
target_compile_definitions(lowp_block PRIVATE
  $<$<COMPILE_LANGUAGE:ASM>:LOWP_RCP_TABLE_PATH="${LOWP_RCP_TABLE_BIN}">)
