/* lowp/block.h: block-scaled formats and the production quantizer recipes.
 *
 * A tensor is quantized in blocks of consecutive elements (along one axis; see
 * lowp/tensor.h for shapes). Each block holds element codes and, for the block-scaled
 * formats, one scale code; NVFP4 and FP8 also carry a per-tensor (or per-head) global
 * scale. The global scale is always stored decode-side:
 *
 *     x ~= value(element) * value(block scale) * global_scale
 *
 * A recipe is one implementation's fp32 arithmetic for choosing the scales and
 * multiplying the elements, in its order, with its approximations (rcp.approx.ftz.f32),
 * its NaN handling in the block amax, and its element conversion. Each recipe's source is
 * cited in ref/block/src/block.c; ref/recipes.md states every step.
 *
 * Invariants:
 *   - lowp_block_quantize is a pure function of (spec, global scale, input): the same
 *     bytes on any machine and thread count.
 *   - lowp_block_dequantize_f64 is exact (E2M1/E4M3 x E4M3/E8M0 x binary32 fits a double);
 *     lowp_block_dequantize_f32 rounds that exact value once (RN).
 */
#ifndef LOWP_BLOCK_H
#define LOWP_BLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_block_format {
    LOWP_NVFP4 = 0,   /* 16 E2M1 elements, E4M3 block scale, fp32 global scale */
    LOWP_MXFP4 = 1,   /* 32 E2M1 elements, E8M0 block scale */
    LOWP_MXFP8 = 2,   /* 32 E4M3 elements, E8M0 block scale */
    LOWP_FP8_E4M3 = 3, /* E4M3 elements, one fp32 scale per tensor (or per head) */
    LOWP_FP8_E5M2 = 4, /* E5M2 elements, one fp32 scale per tensor (or per head) */
    LOWP_BF16_PASS = 5 /* BF16 elements (round to nearest even), no scale */
} lowp_block_format;
#define LOWP_BLOCK_FORMAT_COUNT 6

typedef enum lowp_recipe {
    LOWP_RECIPE_TRTLLM = 0,    /* TRT-LLM / FlashInfer default fast-math path (rcp.approx.ftz) */
    LOWP_RECIPE_EXACT = 1,     /* TransformerEngine; TRT-LLM/FlashInfer with fast math disabled */
    LOWP_RECIPE_MODELOPT = 2,  /* NVIDIA ModelOpt nvfp4_tensor.py */
    LOWP_RECIPE_OCP = 3,       /* OCP MX v1.0: scale = floor(log2 amax) - emax_elem */
    LOWP_RECIPE_RCEIL = 4,     /* NVIDIA MX: scale = amax / max_elem rounded up to a power of two */
    LOWP_RECIPE_SGLANG_KV = 5, /* FlashInfer nvfp4_kv_quantize as SGLang ships it: global scale 1.0 */
    /* torchao 0.18 torch-op recipes (ref/recipes.md "torchao"): NaN element values propagate
     * as on the CPU unless LOWP_BLOCK_NAN_CANONICAL (torch on CUDA tensors). */
    LOWP_RECIPE_TORCHAO = 6,       /* NVFP4 nvfp4_quantize with a per-tensor scale */
    LOWP_RECIPE_TORCHAO_FLOOR = 7, /* MX to_mx ScaleCalculationMode.FLOOR */
    LOWP_RECIPE_TORCHAO_CEIL = 8,  /* MX to_mx CEIL */
    LOWP_RECIPE_TORCHAO_EVEN = 9,  /* MX to_mx EVEN */
    LOWP_RECIPE_TORCHAO_RCEIL = 10, /* MX to_mx RCEIL, eager (torch.log2) path */
    LOWP_RECIPE_COMPRESSED_TENSORS = 11 /* compressed-tensors 0.20 calculate_qparams + quantize
                                           (NVFP4 with its encode-side global scale, MXFP4, MXFP8) */
} lowp_recipe;
#define LOWP_RECIPE_COUNT 12

/* Names: "nvfp4" "mxfp4" "mxfp8" "fp8_e4m3" "fp8_e5m2" "bf16"; "trtllm" "exact"
 * "modelopt" "ocp" "rceil" "sglang-kv" "torchao" "torchao-floor" "torchao-ceil"
 * "torchao-even" "torchao-rceil" "compressed-tensors". modelopt also names ModelOpt's MXFP4 / MXFP8 quantizers.
 * Parsers return 0 or -1. */
const char *lowp_block_format_name(lowp_block_format f);
const char *lowp_recipe_name(lowp_recipe r);
int lowp_block_format_parse(const char *name, lowp_block_format *out);
/* Every recipe name, space-separated, in enum order (for usage and error messages). */
const char *lowp_recipe_names(void);
int lowp_recipe_parse(const char *name, lowp_recipe *out);

size_t lowp_block_size(lowp_block_format f);          /* 16, 32, 32, 1, 1, 1 */
lowp_format lowp_block_element_format(lowp_block_format f);
int lowp_block_has_scales(lowp_block_format f);       /* NVFP4, MXFP4, MXFP8 */
int lowp_block_has_global_scale(lowp_block_format f); /* NVFP4, FP8 */
/* Bytes of element codes for n elements: 4-bit codes are packed two per byte, the
 * even element in the low nibble; n must be even for them. */
size_t lowp_block_code_bytes(lowp_block_format f, size_t n);

/* 0 if the recipe exists for the format, else -1 with a one-sentence reason. */
int lowp_recipe_check(lowp_block_format f, lowp_recipe r, char *why, size_t why_len);
/* The recipe a format uses when none is named ("exact" for NVFP4/FP8/BF16, "ocp" for MX). */
lowp_recipe lowp_recipe_default(lowp_block_format f);

/* The global scale: dec is what is stored (x ~= element * block scale * dec); enc is the
 * encode-side factor that trtllm and exact NVFP4 kernels take (SFScaleVal). Recipes that
 * do not use one of them ignore it; formats without a global scale use {1, 1}. */
typedef struct lowp_global_scale {
    float dec;
    float enc;
} lowp_global_scale;

/* The global scale a recipe derives from a tensor amax, in its own arithmetic and with its
 * guards for amax 0, Inf and NaN (ref/recipes.md): NVFP4 trtllm/exact S = 2688/amax,
 * modelopt g = amax/2688, sglang-kv g = 1; FP8 g = amax/max; MX and BF16 {1, 1}. */
lowp_global_scale lowp_recipe_global_scale(lowp_block_format f, lowp_recipe r, float amax);
/* The global scale from a stored decode-side value: enc = 1/dec (binary32 RN) for the
 * recipes that take enc. */
lowp_global_scale lowp_global_scale_from_dec(lowp_block_format f, lowp_recipe r, float dec);

/* Quantize flags. */
#define LOWP_BLOCK_SCALE_UP 1u /* NVFP4 exact/modelopt: round the E4M3 block scale up, not RN;
                                  ignored by the recipes that have no such step */
#define LOWP_BLOCK_NAN_CANONICAL 2u /* torchao, compressed-tensors and modelopt MX recipes: every NaN the element
                                  arithmetic produces is the GPU's canonical 0x7FFFFFFF (torch
                                  on CUDA tensors), not x86's propagated payload (torch CPU);
                                  ignored by the other recipes */
#define LOWP_BLOCK_CUDA_SCALAR_DIV 4u /* torchao and modelopt MX recipes: a tensor divided by a
                                  Python number is multiplied by the number's binary32
                                  reciprocal, as torch's CUDA division does when the divisor is
                                  a CPU scalar (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu,
                                  "compute a * reciprocal(b)"); torchao's NVFP4 block scale
                                  amax / 6 is then amax * RN(1/6), which differs at E4M3
                                  rounding midpoints (measured on the H200, reports/quantlibs.md);
                                  ignored by the other recipes */
#define LOWP_BLOCK_CUDA_OPS 8u /* compressed-tensors and modelopt MX recipes: the remaining
                                  op semantics of their CUDA paths (ref/recipes.md T6-T8):
                                  T6 float -> integer casts saturate (+Inf -> the type's max),
                                  so compress_mx_scale stores an Inf scale as 0x7E (0x7F on
                                  x86) and ModelOpt MXFP4 an Inf exponent as 0xFF (0x00);
                                  T7 compressed-tensors' Triton _quantize_kernel clamps with
                                  maxnum / minnum, so a NaN element value codes as -max;
                                  T8 ModelOpt MXFP4 divides by torch.exp2(-127) as CUDA
                                  computes it, one subnormal ulp below 2^-127 (a hypothesis
                                  that tools/quantlib_check.py --probe measures);
                                  ignored by the other recipes */

/* What quantizing a tensor did, counted per element or per block. */
typedef struct lowp_quant_counts {
    size_t elements, blocks;
    size_t nan_in, inf_in;          /* NaN / Inf input elements */
    size_t saturated;               /* finite nonzero elements coded as +-max */
    size_t flushed;                 /* nonzero finite elements coded as zero */
    size_t nan_out;                 /* elements whose decoded value is NaN */
    size_t scale_zero;              /* block scales whose value is 0 */
    size_t scale_subnormal;         /* E4M3 block scales in the subnormal range */
    size_t scale_nan;               /* block scales that are NaN (E4M3 0x7F, E8M0 0xFF) */
} lowp_quant_counts;

/* to += from, field by field (the counts of two quantizations together); a NULL to does
 * nothing. */
void lowp_quant_counts_add(lowp_quant_counts *to, const lowp_quant_counts *from);

/* Quantize n elements (a multiple of the block size) as consecutive blocks under the
 * recipe (ref/recipes.md), with global scale gs and LOWP_BLOCK_* flags. codes gets
 * lowp_block_code_bytes(f, n) bytes, scales n / block_size bytes (may be NULL where the
 * format has none). counts may be NULL; otherwise it is added to (not cleared).
 * Returns 0, or -1 with a reason if the recipe does not exist for the format or n is not
 * a multiple of the block size. Vectorized per block; OpenMP-parallel over blocks for
 * large n. */
int lowp_block_quantize(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                        const float *x, size_t n, uint8_t *codes, uint8_t *scales,
                        lowp_quant_counts *counts, char *why, size_t why_len);

/* Exact dequantization: element value * block scale value * global_scale (decode-side).
 * A NaN block scale makes every element of its block NaN. */
void lowp_block_dequantize_f64(lowp_block_format f, float global_scale, const uint8_t *codes,
                               const uint8_t *scales, size_t n, double *out);
void lowp_block_dequantize_f32(lowp_block_format f, float global_scale, const uint8_t *codes,
                               const uint8_t *scales, size_t n, float *out);

/* Element code i of a packed code array (4-bit formats: nibble i). */
uint16_t lowp_block_code_at(lowp_block_format f, const uint8_t *codes, size_t i);

/* rcp.approx.ftz.f32 as the H200 (sm_90) computes it: RN(1/x) corrected by one ulp on
 * the mantissas lowp measured (ref/block/data/, see ref/block/src/rcp_approx.c); subnormal inputs and
 * results flush to zero. Bit-exact for every binary32 input. */
float lowp_rcp_approx_ftz(float x);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_BLOCK_H */
