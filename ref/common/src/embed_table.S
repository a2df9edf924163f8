/* ref/common/src/embed_table.S: embeds one data file (a measured hardware table) into liblowp
 * as read-only data; ref/common/embed_table.cmake assembles it into a layer's object
 * library (lowp_block: ref/block/data/rcp_approx_sm90.bin; lowp_hw:
 * ref/hw/data/ex2_approx_sm90.bin).
 *
 * LOWP_EMBED_PATH is the file's absolute path as a string literal and LOWP_EMBED_NAME the
 * symbol prefix, both set by the CMake function, which also makes the object depend on the
 * file (.incbin is not seen by the preprocessor's dependency scan). ELF / GNU as only
 * (Linux): .incbin, .hidden and the section names below are GNU syntax.
 *
 * NAME_begin .. NAME_end are the file's bytes, nothing added; both symbols are hidden so the
 * shared library does not export them. The trailing .note.GNU-stack section marks the
 * object as not needing an executable stack. */
#if !defined(LOWP_EMBED_PATH) || !defined(LOWP_EMBED_NAME)
#error "LOWP_EMBED_PATH and LOWP_EMBED_NAME are set by ref/common/embed_table.cmake"
#endif
#define EMBED_CAT2(a, b) a##b
#define EMBED_CAT(a, b) EMBED_CAT2(a, b)
#define EMBED_BEGIN EMBED_CAT(LOWP_EMBED_NAME, _begin)
#define EMBED_END EMBED_CAT(LOWP_EMBED_NAME, _end)

    .section .rodata.lowp_embed, "a"
    .balign 16
    .globl EMBED_BEGIN
    .hidden EMBED_BEGIN
    .type EMBED_BEGIN, STT_OBJECT
EMBED_BEGIN:
    .incbin LOWP_EMBED_PATH
    .globl EMBED_END
    .hidden EMBED_END
    .type EMBED_END, STT_OBJECT
EMBED_END:
    .size EMBED_BEGIN, EMBED_END - EMBED_BEGIN
    .size EMBED_END, 0

    .section .note.GNU-stack, ""
