/* ref/block/internal/block_internal.h: the fused NVFP4/MXFP4 quantizer (block_fast.c) and the internal
 * entry point that lets tests choose between it and the generic path (block.c).
 *
 * The generic path in block.c is the definition of every recipe. The fused path is an
 * optimization that must give the same code bytes, scale bytes and counts for every input;
 * any block it cannot prove it handles identically (NaN or Inf input, a non-finite element
 * factor, a scale above 448 under modelopt, constants outside its domain) is handed back
 * to the generic path, one group at a time (16 blocks on AVX-512, 8 on AVX2). Not
 * installed; not part of the API.
 *
 * ref/block/internal/ holds the block layer's private headers that code outside ref/block
 * may use: a test, a tool or a gpu/ program includes "<name>.h" only after its CMake target
 * names ref/block/internal as a PRIVATE include directory, so every such use is declared
 * in the build. */
#ifndef LOWP_BLOCK_INTERNAL_H
#define LOWP_BLOCK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/block.h"

/* Paths of lowp_block_quantize_path. */
#define LOWP_BLOCK_PATH_GENERIC 0 /* block.c only: the definition */
#define LOWP_BLOCK_PATH_AUTO 1    /* the fused path where the CPU and the recipe allow it */

/* lowp_block_quantize with the path chosen. fast_blocks, when not NULL, is set to the
 * number of blocks the fused path produced (the rest went through block.c's generic code),
 * so a test can tell that it compared something. lowp_block_quantize is
 * lowp_block_quantize_path(..., LOWP_BLOCK_PATH_AUTO, NULL). */
int lowp_block_quantize_path(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                             unsigned flags, const float *x, size_t n, uint8_t *codes,
                             uint8_t *scales, lowp_quant_counts *counts, char *why,
                             size_t why_len, int path, size_t *fast_blocks);

/* 1 when the fused kernel runs on this CPU within the current ISA limit (below): x86-64
 * with AVX2, or AVX-512 F/BW/DQ/VL; else 0. */
int lowp_block_fast_cpu(void);

/* Instruction sets of the fused kernel, in increasing order. The kernel is chosen at run
 * time (cpuid), so one binary runs on any x86-64. */
#define LOWP_BLOCK_ISA_SCALAR 0 /* no fused kernel: block.c's generic path only */
#define LOWP_BLOCK_ISA_AVX2 1   /* 8 blocks a group */
#define LOWP_BLOCK_ISA_AVX512 2 /* AVX-512 F/BW/DQ/VL, 16 blocks a group */

/* The best instruction set this CPU (and OS) runs, ignoring the limit. */
int lowp_block_fast_isa_supported(void);
/* The instruction set lowp_block_quantize uses now: the supported one, at most the limit. */
int lowp_block_fast_isa(void);
/* Set the limit (an LOWP_BLOCK_ISA_* value; out-of-range values are clamped to that
 * range); returns the previous limit. The default is LOWP_BLOCK_ISA_AVX512, i.e. none.
 * For tests and benchmarks that compare the kernels on one machine: a call in progress
 * keeps the ISA it started with, but set it only while no other thread quantizes. */
int lowp_block_fast_limit_isa(int max_isa);
/* "scalar", "avx2", "avx512"; "?" for anything else. */
const char *lowp_block_fast_isa_name(int isa);

/* What the fused kernel needs from block.c's recipe context. */
typedef struct lowp_block_fast {
    lowp_block_format format;   /* LOWP_NVFP4 or LOWP_MXFP4 */
    lowp_recipe recipe;
    int scale_up;               /* E4M3 scale rounded up (NVFP4 exact/modelopt + LOWP_BLOCK_SCALE_UP) */
    float enc, dec;             /* the global scale as given (NVFP4) */
    float rcp6, rcp_dec;        /* rcp~(6), rcp~(dec): block.c's constants */
    const float *factor_of_code; /* [256] element factor (or divisor) per scale code */
    /* Set by lowp_block_fast_init: */
    float mul_a, mul_b;         /* scale arithmetic constants, per recipe */
    int divide;                 /* elements are x / factor (modelopt, MX rceil) */
    int sign_lt0;               /* E2M1 sign bit is (v < 0): modelopt's _cast_fp4 */
    int zero_factor;            /* factor 0 for an all-zero block (block.c's rule) */
    int isa;                    /* LOWP_BLOCK_ISA_AVX2 or _AVX512: the kernel this call runs */
} lowp_block_fast;

/* Fill the derived fields; 1 if the fused kernel can run this call (CPU, format, recipe,
 * and constants in the domain the kernel handles), else 0 and the caller uses block.c. */
int lowp_block_fast_init(lowp_block_fast *p);

/* Blocks [first, first + nblocks) of the current range that the fused kernel left to the
 * generic path. The callee must produce exactly what block.c produces for them. */
typedef void (*lowp_block_fallback_fn)(void *arg, size_t first, size_t nblocks);

/* Quantize nb blocks of x (16 elements each for NVFP4, 32 for MXFP4): codes gets the packed
 * codes, scales one byte a block (scales may be NULL), counts (may be NULL) is added to for
 * the blocks done here. Groups of blocks (16 on AVX-512, 8 on AVX2) the kernel cannot
 * handle are passed to fallback. Returns the number of blocks done by the kernel. Only call after
 * lowp_block_fast_init returned 1. */
size_t lowp_block_fast_quantize(const lowp_block_fast *p, const float *x, size_t nb,
                                uint8_t *codes, uint8_t *scales, lowp_quant_counts *counts,
                                lowp_block_fallback_fn fallback, void *arg);

#endif
