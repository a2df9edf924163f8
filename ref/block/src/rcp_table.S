/* ref/block/src/rcp_table.S: embeds ref/block/data/rcp_approx_sm90.bin (the measured rcp.approx.ftz.f32
 * correction table, format in ref/block/src/rcp_approx.c) into liblowp as read-only data.
 *
 * LOWP_RCP_TABLE_PATH is the absolute path of the .bin as a string literal, set by
 * ref/block/rcp_table.cmake, which also makes this object depend on the file (.incbin is not
 * seen by the preprocessor's dependency scan). ELF / GNU as only (Linux): .incbin,
 * .hidden and the section names below are GNU syntax.
 *
 * lowp_rcp_table_begin .. lowp_rcp_table_end are the file's bytes, nothing added; both
 * symbols are hidden so the shared library does not export them. The trailing
 * .note.GNU-stack section marks the object as not needing an executable stack. */
#ifndef LOWP_RCP_TABLE_PATH
#error "LOWP_RCP_TABLE_PATH must name ref/block/data/rcp_approx_sm90.bin (see ref/block/rcp_table.cmake)"
#endif

    .section .rodata.lowp_rcp_table, "a"
    .balign 16
    .globl lowp_rcp_table_begin
    .hidden lowp_rcp_table_begin
    .type lowp_rcp_table_begin, STT_OBJECT
lowp_rcp_table_begin:
    .incbin LOWP_RCP_TABLE_PATH
    .globl lowp_rcp_table_end
    .hidden lowp_rcp_table_end
    .type lowp_rcp_table_end, STT_OBJECT
lowp_rcp_table_end:
    .size lowp_rcp_table_begin, lowp_rcp_table_end - lowp_rcp_table_begin
    .size lowp_rcp_table_end, 0

    .section .note.GNU-stack, ""
