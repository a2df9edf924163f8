# ref/common/embed_table.cmake: lowp_embed_table(LAYER NAME BIN) puts the bytes of BIN into
# the object library lowp_LAYER as the hidden symbols NAME_begin .. NAME_end, through
# src/embed_table.S (.incbin). The path reaches the assembler as LOWP_EMBED_PATH (a string
# literal); OBJECT_DEPENDS re-assembles it when the file changes (.incbin is invisible to the
# preprocessor's dependency scan). One table a layer: the definitions are the target's.
# GNU as / ELF only, like the rest of the build (Linux).
enable_language(ASM)
set(LOWP_EMBED_TABLE_S ${CMAKE_CURRENT_LIST_DIR}/src/embed_table.S)
function(lowp_embed_table layer name bin)
  if(NOT EXISTS ${bin})
    message(FATAL_ERROR "lowp: ${bin} is missing (the GPU probe of gpu/probe/ regenerates it)")
  endif()
  set(obj ${CMAKE_CURRENT_BINARY_DIR}/embed_${name}.S)
  # a copy per table so that each has its own dependency on its file
  configure_file(${LOWP_EMBED_TABLE_S} ${obj} COPYONLY)
  set_source_files_properties(${obj} PROPERTIES LANGUAGE ASM OBJECT_DEPENDS ${bin})
  target_sources(lowp_${layer} PRIVATE ${obj})
  target_compile_definitions(lowp_${layer} PRIVATE
    $<$<COMPILE_LANGUAGE:ASM>:LOWP_EMBED_PATH="${bin}" LOWP_EMBED_NAME=${name}>)
endfunction()
