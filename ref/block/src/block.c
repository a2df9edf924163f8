/* ref/block/src/block.c: block-scaled formats and the production quantizer recipes.
 *
 * Every recipe is written step by step as ref/recipes.md states it, in binary32 with
 * round-to-nearest-even and no contraction (the library is built with -ffp-contract=off,
 * and ISO C11 evaluates float expressions in float: FLT_EVAL_METHOD == 0 on x86-64).
 *
 * Sources followed (restated in ref/notes/formats.md sections 4 and 5):
 *   trtllm NVFP4  TensorRT-LLM cpp/tensorrt_llm/kernels/quantization.cuh cvt_warp_fp16_to_fp4
 *                 (FlashInfer csrc/nv_internal/.../quantization_utils.cuh, default fast math)
 *   exact NVFP4   the same kernel with TRTLLM_/FLASHINFER_DISABLE_FP4_QUANT_FAST_MATH=1, which
 *                 its comment says matches TransformerEngine core_nvfp4.cuh
 *   modelopt      NVIDIA Model-Optimizer modelopt/torch/quantization/qtensor/nvfp4_tensor.py
 *   sglang-kv     FlashInfer csrc/fp4_kv_quantization.cu nvfp4_kv_quantize, global scale 1.0
 *                 as SGLang's NVFP4 KV cache ships it
 *   ocp           OCP MX v1.0 section 6.3; exponent from the bits as torchao to_mx FLOOR
 *   rceil         cuDNN block scaling / torchao RCEIL: amax * (1/max) rounded up to E8M0
 *   trtllm MX     cvt_warp_fp16_to_mxfp8, cvt_warp_fp16_to_fp4<UE8M0_SF=true> (exp2f_rcp)
 *   exact FP8     vLLM quant_utils.cuh scaled_vec_conversion: x / scale, SATFINITE
 *   torchao       torchao 0.18 prototype/mx_formats nvfp4_tensor.py nvfp4_quantize and
 *                 mx_tensor.py to_mx / _to_mx_rceil (FLOOR, CEIL, EVEN, RCEIL), its E2M1 cast
 *                 prototype/custom_fp_utils.py _f32_to_floatx_unpacked
 *   modelopt MX   ModelOpt 0.47 qtensor/mxfp4_tensor.py, qtensor/mxfp8_tensor.py
 *   compressed-tensors  compressed-tensors 0.20 quantization/utils/helpers.py calculate_qparams
 *                 and generate_gparam, mxfp_utils.py generate_mx_scales, forward_helpers.py
 *                 _quantize, fp4_utils.py cast_to_fp4, nvfp4/helpers.py pack_fp4_to_uint8
 *
 * Structure: blocks are processed in chunks. For each block the scalar part (amax, scale
 * code, element factor) is computed once; the elements of the whole chunk are then scaled
 * in one loop and encoded by the vectorized scalar codec (lowp_encode_f32_u8), so the
 * per-element work is a multiply (or divide) and a branch-free encode. This code is the
 * definition of every recipe. NVFP4 and MXFP4 go first to a fused single-pass kernel
 * (block_fast.c, AVX-512) where the CPU has it; it produces the same bytes and counts and
 * hands back to quantize_chunk every group of blocks it cannot prove it handles the same. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "block_internal.h"
#include "lowp/bits.h"
#include "lowp/codec_core.h" /* lowp_f32_pow2 */
#include "lowp/why.h"
#include "lowp/block.h"

#define CHUNK_ELEMS 4096                  /* elements per chunk: a multiple of every block size */
#define LOWP_CHUNK_BLOCKS (CHUNK_ELEMS / 16) /* at most this many blocks in a chunk */

static const char *const block_format_names[LOWP_BLOCK_FORMAT_COUNT] = {
    "nvfp4", "mxfp4", "mxfp8", "fp8_e4m3", "fp8_e5m2", "bf16"};
static const char *const recipe_names[LOWP_RECIPE_COUNT] = {
    "trtllm",  "exact",         "modelopt",     "ocp",          "rceil",        "sglang-kv",
    "torchao", "torchao-floor", "torchao-ceil", "torchao-even", "torchao-rceil",
    "compressed-tensors"};
static const size_t block_sizes[LOWP_BLOCK_FORMAT_COUNT] = {16, 32, 32, 1, 1, 1};
static const lowp_format element_formats[LOWP_BLOCK_FORMAT_COUNT] = {
    LOWP_E2M1, LOWP_E2M1, LOWP_E4M3, LOWP_E4M3, LOWP_E5M2, LOWP_BF16};

/* recipe_names joined by spaces; tests/test_block.c holds the two equal */
const char *lowp_recipe_names(void)
{
    return "trtllm exact modelopt ocp rceil sglang-kv torchao torchao-floor torchao-ceil "
           "torchao-even torchao-rceil compressed-tensors";
}

const char *lowp_block_format_name(lowp_block_format f)
{
    return (unsigned)f < LOWP_BLOCK_FORMAT_COUNT ? block_format_names[f] : "?";
}
const char *lowp_recipe_name(lowp_recipe r)
{
    return (unsigned)r < LOWP_RECIPE_COUNT ? recipe_names[r] : "?";
}
int lowp_block_format_parse(const char *name, lowp_block_format *out)
{
    for (int i = 0; name != NULL && i < LOWP_BLOCK_FORMAT_COUNT; i++)
        if (strcmp(name, block_format_names[i]) == 0) {
            *out = (lowp_block_format)i;
            return 0;
        }
    return -1;
}
int lowp_recipe_parse(const char *name, lowp_recipe *out)
{
    for (int i = 0; name != NULL && i < LOWP_RECIPE_COUNT; i++)
        if (strcmp(name, recipe_names[i]) == 0) {
            *out = (lowp_recipe)i;
            return 0;
        }
    if (name != NULL && strcmp(name, "sglang_kv") == 0) {
        *out = LOWP_RECIPE_SGLANG_KV;
        return 0;
    }
    return -1;
}

size_t lowp_block_size(lowp_block_format f) { return block_sizes[f]; }
lowp_format lowp_block_element_format(lowp_block_format f) { return element_formats[f]; }
int lowp_block_has_scales(lowp_block_format f) { return f <= LOWP_MXFP8; }
int lowp_block_has_global_scale(lowp_block_format f)
{
    return f == LOWP_NVFP4 || f == LOWP_FP8_E4M3 || f == LOWP_FP8_E5M2;
}
size_t lowp_block_code_bytes(lowp_block_format f, size_t n)
{
    switch (lowp_format_bits(element_formats[f])) {
    case 4: return (n + 1) / 2;
    case 16: return 2 * n;
    default: return n;
    }
}

int lowp_recipe_check(lowp_block_format f, lowp_recipe r, char *why, size_t why_len)
{
    if ((unsigned)f >= LOWP_BLOCK_FORMAT_COUNT)
        return lowp_why_set(why, why_len, "unknown block format");
    if ((unsigned)r >= LOWP_RECIPE_COUNT)
        return lowp_why_set(why, why_len, "unknown recipe");
    switch (f) {
    case LOWP_NVFP4:
        if (r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT ||
            r == LOWP_RECIPE_SGLANG_KV || r == LOWP_RECIPE_TORCHAO || r == LOWP_RECIPE_COMPRESSED_TENSORS)
            return 0;
        return lowp_why_set(why, why_len,
                            "NVFP4 recipes are trtllm, exact, modelopt, sglang-kv, torchao and "
                            "compressed-tensors (ocp, rceil and torchao-* are MX scale rules)");
    case LOWP_MXFP4:
    case LOWP_MXFP8:
        if (r == LOWP_RECIPE_OCP || r == LOWP_RECIPE_RCEIL || r == LOWP_RECIPE_TRTLLM ||
            r == LOWP_RECIPE_MODELOPT || r >= LOWP_RECIPE_TORCHAO_FLOOR)
            return 0;
        return lowp_why_set(why, why_len,
                            "MX recipes are ocp, rceil, trtllm, modelopt, torchao-floor, "
                            "torchao-ceil, torchao-even, torchao-rceil and compressed-tensors");
    default:
        if (r == LOWP_RECIPE_EXACT)
            return 0;
        return lowp_why_set(why, why_len, "FP8 per-tensor and BF16 have one recipe, exact");
    }
}

lowp_recipe lowp_recipe_default(lowp_block_format f)
{
    return (f == LOWP_MXFP4 || f == LOWP_MXFP8) ? LOWP_RECIPE_OCP : LOWP_RECIPE_EXACT;
}

/* ---- global scale ------------------------------------------------------------ */

lowp_global_scale lowp_recipe_global_scale(lowp_block_format f, lowp_recipe r, float amax)
{
    lowp_global_scale gs = {1.0f, 1.0f};
    if (f == LOWP_NVFP4) {
        switch (r) {
        case LOWP_RECIPE_TRTLLM: /* callers compute (448*6)/amax; no guard in the kernel */
            gs.enc = 2688.0f / amax;
            gs.dec = 1.0f / gs.enc;
            break;
        case LOWP_RECIPE_EXACT: /* TE: min(2688/amax, FLT_MAX), 1 for amax 0 or quotient 0 */
            gs.enc = fminf(2688.0f / amax, FLT_MAX);
            if (amax == 0.0f || gs.enc == 0.0f)
                gs.enc = 1.0f;
            gs.dec = (float)(1.0 / (double)gs.enc);
            break;
        case LOWP_RECIPE_MODELOPT: /* weights_scaling_factor_2 = amax / (6 * 448) */
        case LOWP_RECIPE_TORCHAO:  /* per_tensor_amax_to_scale: amax / (448 * 6) */
            gs.dec = amax / 2688.0f;
            gs.enc = 1.0f / gs.dec;
            break;
        case LOWP_RECIPE_COMPRESSED_TENSORS: /* generate_gparam: 2688 / clamp(amax, FLT_MIN),
                                                NaN / Inf -> 1 */
            gs.enc = 2688.0f / (amax < FLT_MIN ? FLT_MIN : amax);
            gs.enc = isfinite(gs.enc) ? gs.enc : 1.0f;
            gs.dec = 1.0f / gs.enc;
            break;
        default: /* sglang-kv: uncalibrated global scale 1.0 */
            break;
        }
    } else if (f == LOWP_FP8_E4M3 || f == LOWP_FP8_E5M2) {
        float maxv = f == LOWP_FP8_E4M3 ? 448.0f : 57344.0f;
        if (amax > 0.0f && isfinite(amax))
            gs.dec = amax / maxv;
        gs.enc = 1.0f / gs.dec;
    }
    return gs;
}

lowp_global_scale lowp_global_scale_from_dec(lowp_block_format f, lowp_recipe r, float dec)
{
    (void)f;
    (void)r;
    lowp_global_scale gs = {dec, 1.0f / dec};
    return gs;
}

/* ---- per-block scalar part --------------------------------------------------- */

typedef struct recipe_ctx {
    lowp_block_format format;
    lowp_recipe recipe;
    lowp_global_scale gs;
    unsigned flags;
    size_t bs;
    lowp_codec elem;      /* element conversion */
    lowp_codec scale;     /* block scale conversion */
    int divide;           /* elements are x / factor rather than x * factor */
    float elem_max;       /* largest finite element value */
    float rcp6, rcp448, rcp_enc, rcp_dec; /* rcp~ constants of the recipe */
    /* The element factor of a block depends on the block only through its scale code
     * (given a nonzero amax): computed once per call for all 256 codes, so the per-block
     * work is an amax, a few multiplies, one encode and one table read. */
    float factor_of_code[256];
    int zero_amax_zero_factor; /* recipe sets the factor to 0 for an all-zero block */
    lowp_codec torch_e4m3;     /* tensor.to(float8_e4m3fn): the torch-op recipes' E4M3 cast */
} recipe_ctx;

static float code_factor(const recipe_ctx *c, uint8_t q);

static int init_ctx(recipe_ctx *c, lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                    unsigned flags)
{
    memset(c, 0, sizeof *c);
    c->format = f;
    c->recipe = r;
    c->gs = gs;
    c->flags = flags;
    c->bs = block_sizes[f];
    lowp_format ef = element_formats[f];
    /* Elements: the hardware cvt.rn(.satfinite) conversions; BF16 __float2bfloat16_rn. */
    if (lowp_codec_init(&c->elem, ef, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, NULL, 0) ||
        lowp_codec_init(&c->torch_e4m3, LOWP_E4M3, LOWP_PROFILE_TORCH, LOWP_RN, LOWP_SAT_OFF, NULL, 0))
        return -1;
    c->elem_max = lowp_decode_f32(ef, lowp_format_max_code(ef));
    /* The round-up variant is a step of the exact and modelopt recipes only (recipes.md);
     * trtllm and sglang-kv have no such step, so the flag changes nothing there. */
    int up = (flags & LOWP_BLOCK_SCALE_UP) != 0 && (r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT);
    int rc = 0;
    switch (f) {
    case LOWP_NVFP4:
        if (r == LOWP_RECIPE_MODELOPT) /* torch .to(float8_e4m3fn): no saturation */
            rc = lowp_codec_init(&c->scale, LOWP_E4M3, up ? LOWP_PROFILE_OCP : LOWP_PROFILE_TORCH,
                                 up ? LOWP_RU : LOWP_RN, LOWP_SAT_OFF, NULL, 0);
        else
            rc = lowp_codec_init(&c->scale, LOWP_E4M3, up ? LOWP_PROFILE_OCP : LOWP_PROFILE_CUDA,
                                 up ? LOWP_RU : LOWP_RN, LOWP_SAT_ON, NULL, 0);
        c->divide = r == LOWP_RECIPE_MODELOPT;
        break;
    case LOWP_MXFP4:
    case LOWP_MXFP8:
        rc = lowp_codec_init(&c->scale, LOWP_E8M0, LOWP_PROFILE_CUDA, LOWP_RU, LOWP_SAT_ON, NULL, 0);
        c->divide = r == LOWP_RECIPE_RCEIL;
        break;
    default:
        c->divide = f != LOWP_BF16_PASS;
        break;
    }
    c->rcp6 = lowp_rcp_approx_ftz(6.0f);
    c->rcp448 = lowp_rcp_approx_ftz(448.0f);
    c->rcp_enc = lowp_rcp_approx_ftz(gs.enc);
    c->rcp_dec = lowp_rcp_approx_ftz(gs.dec);
    c->zero_amax_zero_factor = r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_SGLANG_KV;
    for (unsigned q = 0; q < 256; q++)
        c->factor_of_code[q] = code_factor(c, (uint8_t)q);
    return rc;
}

/* The element factor (multiplier, or divisor when c->divide) of a block whose scale code
 * is q and whose amax is nonzero: the recipe's last steps, as ref/recipes.md states them. */
static float code_factor(const recipe_ctx *c, uint8_t q)
{
    int fp4 = c->format == LOWP_MXFP4;
    switch (c->format) {
    case LOWP_NVFP4: {
        float qv = lowp_decode_f32(LOWP_E4M3, q);
        switch (c->recipe) {
        case LOWP_RECIPE_TRTLLM: return lowp_rcp_approx_ftz(qv * c->rcp_enc);
        case LOWP_RECIPE_EXACT: return fminf(1.0f / (qv * (1.0f / c->gs.enc)), FLT_MAX);
        case LOWP_RECIPE_MODELOPT: return qv * c->gs.dec; /* the divisor */
        default: return lowp_rcp_approx_ftz(qv * c->gs.dec); /* sglang-kv */
        }
    }
    case LOWP_MXFP4:
    case LOWP_MXFP8:
        switch (c->recipe) {
        case LOWP_RECIPE_OCP: /* x / 2^e == x * 2^-e: one exact scaling, one rounding */
            return q == 0xff ? NAN : lowp_f32_pow2(127 - (int)q);
        case LOWP_RECIPE_RCEIL: return lowp_decode_f32(LOWP_E8M0, q); /* the divisor */
        default: /* trtllm; MXFP4's exp2f_rcp gives 1.0 for code 0x00: the quirk, kept */
            if (fp4)
                return q == 0 ? 1.0f : lowp_f32_pow2(127 - (int)q);
            return lowp_rcp_approx_ftz(lowp_decode_f32(LOWP_E8M0, q));
        }
    case LOWP_FP8_E4M3:
    case LOWP_FP8_E5M2: return c->gs.dec;
    default: return 1.0f;
    }
}

/* Block amax of nb consecutive blocks of BS elements: NaN ignored (fmaxf, __hmax2) or
 * propagated (torch.amax). Fixed block sizes so the inner loops vectorize. */
#define AMAX_BLOCKS(BS)                                                                            \
    for (size_t b = 0; b < nb; b++) {                                                              \
        const float *xb = x + b * (BS);                                                            \
        float m = 0.0f;                                                                            \
        int nan = 0;                                                                               \
        for (size_t i = 0; i < (BS); i++) {                                                        \
            float a = fabsf(xb[i]);                                                                \
            nan |= a != a;                                                                         \
            m = a > m ? a : m; /* a NaN compares false: ignored */                                 \
        }                                                                                          \
        amax[b] = (propagate && nan) ? NAN : m;                                                    \
    }

static void block_amax(const float *x, size_t nb, size_t bs, int propagate, float *amax)
{
    if (bs == 16)
        AMAX_BLOCKS(16)
    else
        AMAX_BLOCKS(32)
}

/* Scale codes and element factors of nb blocks (ref/recipes.md, step by step). */
static void block_scales(const recipe_ctx *c, const float *x, size_t nb, uint8_t *q, float *factor)
{
    float amax[LOWP_CHUNK_BLOCKS], sf[LOWP_CHUNK_BLOCKS] = {0};
    int propagate = c->recipe == LOWP_RECIPE_MODELOPT || c->recipe == LOWP_RECIPE_OCP ||
                    c->recipe == LOWP_RECIPE_RCEIL;
    block_amax(x, nb, c->bs, propagate, amax);
    const float S = c->gs.enc, g = c->gs.dec;
    switch (c->format == LOWP_NVFP4 ? c->recipe + 100 : c->recipe) {
    case LOWP_RECIPE_TRTLLM + 100:
        for (size_t b = 0; b < nb; b++)
            sf[b] = S * (amax[b] * c->rcp6);
        break;
    case LOWP_RECIPE_EXACT + 100: {
        const float k = S * (1.0f / 6.0f);
        for (size_t b = 0; b < nb; b++)
            sf[b] = amax[b] != 0.0f ? amax[b] * k : 0.0f;
        break;
    }
    case LOWP_RECIPE_MODELOPT + 100: {
        const float six_g = 6.0f * g;
        for (size_t b = 0; b < nb; b++) {
            float s = amax[b] / six_g;
            s = s == 0.0f ? 1.0f : s;
            s = s < 0x1p-9f ? 0x1p-9f : s; /* clamp(min=2**-9, max=448); NaN compares false */
            sf[b] = s > 448.0f ? 448.0f : s;
        }
        break;
    }
    case LOWP_RECIPE_SGLANG_KV + 100:
        for (size_t b = 0; b < nb; b++)
            sf[b] = c->rcp_dec * (amax[b] * c->rcp6);
        break;
    case LOWP_RECIPE_OCP: {
        /* floor(log2 amax) - emax from the exponent bits; subnormal and zero amax count as
         * -127; the code is clamped at 0 (2^-127); NaN and Inf amax give 0xFF. */
        const int emax = c->format == LOWP_MXFP4 ? 2 : 8;
        for (size_t b = 0; b < nb; b++) {
            uint32_t mb;
            memcpy(&mb, &amax[b], sizeof mb);
            int biased = (int)((mb >> 23) & 0xffu);
            int code = biased == 0 ? 0 : biased - emax;
            code = code < 0 ? 0 : code;
            q[b] = (uint8_t)(biased == 0xff ? 0xff : code);
        }
        for (size_t b = 0; b < nb; b++)
            factor[b] = c->factor_of_code[q[b]];
        return;
    }
    case LOWP_RECIPE_RCEIL: {
        const float inv = c->format == LOWP_MXFP4 ? 1.0f / 6.0f : 1.0f / 448.0f;
        for (size_t b = 0; b < nb; b++)
            sf[b] = amax[b] * inv;
        break;
    }
    default: /* trtllm MX */ {
        const float r = c->format == LOWP_MXFP4 ? c->rcp6 : c->rcp448;
        for (size_t b = 0; b < nb; b++)
            sf[b] = amax[b] * r;
        break;
    }
    }
    /* A NaN from the arithmetic (Inf * 0, 0 / 0) is the GPU's canonical positive NaN; x86
     * would make it negative, which a sign-keeping scale conversion would see. */
    if (c->format == LOWP_NVFP4)
        for (size_t b = 0; b < nb; b++)
            sf[b] = sf[b] != sf[b] ? fabsf(sf[b]) : sf[b];
    /* ModelOpt's block amax is torch.max, whose NaN on the CPU is 0xFFFFFFFF: the scale
     * converts with its sign (0xFF); on CUDA tensors the canonical NaN (0x7F). */
    if (c->format == LOWP_NVFP4 && c->recipe == LOWP_RECIPE_MODELOPT && !(c->flags & LOWP_BLOCK_NAN_CANONICAL))
        for (size_t b = 0; b < nb; b++)
            sf[b] = sf[b] != sf[b] ? -fabsf(sf[b]) : sf[b];
    lowp_encode_f32_u8(&c->scale, sf, q, nb);
    if (c->zero_amax_zero_factor || c->recipe == LOWP_RECIPE_TRTLLM)
        for (size_t b = 0; b < nb; b++)
            factor[b] = amax[b] != 0.0f ? c->factor_of_code[q[b]] : 0.0f;
    else
        for (size_t b = 0; b < nb; b++)
            factor[b] = c->factor_of_code[q[b]];
}

/* ---- quantize ------------------------------------------------------------------ */


/* (double)x, exact, also for a binary32 subnormal under MXCSR.DAZ (which the conversion
 * instruction would read as 0): a subnormal is its fraction times 2^-149, both exact in
 * binary64, and 2^-149 is a binary64 normal that DAZ leaves alone. */
static double widen_f32(float x)
{
    uint32_t b = lowp_f32_bits(x);
    if ((b & 0x7f800000u) != 0 || (b & 0x7fffffu) == 0)
        return (double)x; /* normal, zero, Inf or NaN: the conversion is exact under DAZ */
    double m = ldexp((double)(b & 0x7fffffu), -149);
    return (b >> 31) ? -m : m;
}

static void count_chunk(const recipe_ctx *c, const float *x, const float *v, const uint8_t *ec,
                        const uint8_t *q, size_t n, lowp_quant_counts *k)
{
    lowp_format ef = element_formats[c->format];
    uint16_t maxc = lowp_format_max_code(ef);
    uint16_t magmask = (uint16_t)((1u << (lowp_format_bits(ef) - 1)) - 1u);
    /* Decode tables, once per chunk: every element and scale code decodes exactly, in
     * binary64 and never through a binary32 operand: with MXCSR.DAZ set, widening the
     * binary32 subnormal 2^-127 (E8M0 code 0) or a subnormal dec would read it as 0 and
     * count its block's elements as flushed, which the fused kernels do not. */
    double ev[256], sv[256];
    unsigned nec = lowp_format_code_count(ef);
    for (unsigned j = 0; j < nec && j < 256; j++)
        ev[j] = lowp_decode_f64(ef, (uint16_t)j);
    int has_s = lowp_block_has_scales(c->format);
    lowp_format sf = c->format == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0;
    for (unsigned j = 0; j < 256; j++)
        sv[j] = has_s ? lowp_decode_f64(sf, (uint16_t)j) : 1.0;
    double g = lowp_block_has_global_scale(c->format) ? widen_f32(c->gs.dec) : 1.0;
    size_t bs = c->bs;
    k->elements += n;
    for (size_t i = 0; i < n; i++) {
        float xi = x[i];
        double d = ev[ec[i]] * (has_s ? sv[q[i / bs]] : 1.0) * g;
        k->nan_in += isnan(xi) != 0;
        k->inf_in += isinf(xi) != 0;
        k->nan_out += isnan(d) != 0;
        if (isfinite(xi) && xi != 0.0f) {
            k->saturated += ((ec[i] & magmask) == maxc) && fabsf(v[i]) > c->elem_max; /* NaN: no */
            k->flushed += d == 0.0;
        }
    }
}

static void count_scales(lowp_block_format f, const uint8_t *q, size_t nb, lowp_quant_counts *k)
{
    k->blocks += nb;
    if (!lowp_block_has_scales(f))
        return;
    for (size_t b = 0; b < nb; b++) {
        if (f == LOWP_NVFP4) {
            uint8_t m = q[b] & 0x7f;
            k->scale_zero += m == 0;
            k->scale_subnormal += m != 0 && (m >> 3) == 0;
            k->scale_nan += m == 0x7f;
        } else {
            k->scale_nan += q[b] == 0xff;
        }
    }
}

/* ---- the torch-op recipes: torchao and ModelOpt MX (ref/recipes.md) -------------- */

/* The recipes written with torch tensor ops rather than a kernel: one block at a time,
 * scalar, in the libraries' operand order (x86 propagates the first NaN operand's payload,
 * which torchao's E2M1 cast reads). */
static int torch_op_recipe(const recipe_ctx *c)
{
    return c->recipe >= LOWP_RECIPE_TORCHAO ||
           (c->recipe == LOWP_RECIPE_MODELOPT && c->format != LOWP_NVFP4);
}

/* A NaN element value as the device makes it: propagated (CPU) or the canonical
 * 0x7FFFFFFF every CUDA arithmetic instruction returns (LOWP_BLOCK_NAN_CANONICAL). */
static float device_nan(const recipe_ctx *c, float v)
{
    return (c->flags & LOWP_BLOCK_NAN_CANONICAL) && v != v ? lowp_f32_from_bits(0x7fffffffu) : v;
}

/* torch.clamp(v, -hi, hi): NaN passes through. */
static float clamp_sym(float v, float hi)
{
    return v > hi ? hi : (v < -hi ? -hi : v);
}

/* compressed-tensors' clamp of x / scale to [-hi, hi]: torch.clamp on CPU tensors (NaN
 * passes); on CUDA (LOWP_BLOCK_CUDA_OPS, recipes.md T7) Triton's _quantize_kernel
 * `tl.clamp(output, q_min, q_max)` with q_min / q_max loaded from memory, which lowers to
 * maxnum(v, -hi) then minnum(., hi): a NaN v gives -hi. Inf clamps as on the CPU. */
static float ct_clamp(const recipe_ctx *c, float v, float hi)
{
    return (c->flags & LOWP_BLOCK_CUDA_OPS) && v != v ? -hi : clamp_sym(v, hi);
}

/* torch.exp2(-127.0) on a CUDA float32 tensor (LOWP_BLOCK_CUDA_OPS, recipes.md T8):
 * 0x003FFFFF, one subnormal ulp below 2^-127 (measured by tools/quantlib_check.py's probe on
 * the H200, 2026-12-02: the only integer in [-150, 127] where torch.exp2 is not exact there).
 * Every exponent ModelOpt divides by is >= -127 (its clamp), so only -127 is modelled. */
#define CUDA_EXP2_M127_BITS 0x003fffffu

/* log2 rounded once to binary32 (torch.log2 on a float32 tensor, assumed correctly rounded:
 * the binary64 log2 is within an ulp of binary64, far inside half an ulp of binary32 except
 * at exact powers of two, where both are exact). log2(0) = -Inf, log2(Inf) = Inf. */
static float log2_f32(float d)
{
    return (float)log2((double)d);
}

/* torchao _f32_to_floatx_unpacked(x, ebits 2, mbits 1), on the bits: |x| >= 6 (Inf too)
 * -> 7; |x| < 1 -> RNE to a multiple of 0.5 by adding 2^22; otherwise the exponent rebias
 * plus round-half-even adder, (a - (126 << 23) + 0x1FFFFF + odd) >> 22, kept to 8 bits
 * (.to(uint8)). A NaN compares false twice and takes that last branch: quiet NaNs give 3
 * (payload bit 21 clear) or 4 (set). The sign bit is ORed back. */
static uint8_t torchao_e2m1(float x)
{
    uint32_t b = lowp_f32_bits(x), a = b & 0x7fffffffu, code;
    float ax = lowp_f32_from_bits(a);
    if (ax >= 6.0f)
        code = 7;
    else if (ax < 1.0f)
        code = lowp_f32_bits(ax + 0x1p22f) - 0x4A800000u;
    else
        code = ((a - (126u << 23) + 0x1FFFFFu + ((a >> 22) & 1u)) >> 22) & 0xffu;
    return (uint8_t)(code | ((b >> 31) << 3));
}

/* ModelOpt MXFP4QTensor cast_fp4: ord = #{bounds b : |v| - b > 0} (ties go down), sign bit
 * (2 - sign(v)) // 2, which is 1 for v < 0 and for +-0; torch.sign(NaN) is 0, so NaN -> 0x8
 * (measured, torch 2.15 CPU). */
static uint8_t modelopt_mx_e2m1(float v)
{
    static const float bounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    if (v != v)
        return 8;
    float a = fabsf(v);
    unsigned ord = 0;
    for (int i = 0; i < 7; i++)
        ord += a > bounds[i];
    return (uint8_t)((v > 0.0f ? 0u : 8u) + ord);
}

/* compressed-tensors cast_to_fp4 then pack_fp4_to_uint8: RNE magnitude (its thresholds
 * are the E2M1 midpoints with ties to even), times sign(v), so a negative v that rounds
 * to 0 keeps the sign bit and -0 does not (sign(-0) = 0); the code is the index of
 * (q * 2).to(int8), which is 0 for NaN on x86; the sign bit is signbit(q). */
static uint8_t ct_e2m1(const recipe_ctx *c, float v)
{
    if (v != v)
        return 0;
    uint8_t mag;
    lowp_encode_f32_u8(&c->elem, &v, &mag, 1);
    return (uint8_t)((mag & 7u) | (v < 0.0f ? 8u : 0u));
}

/* torch's float8_e4m3fn -> float32: exact, and the NaN codes give 0x7FF00000 with the sign
 * (measured, torch 2.15), whose payload bit 21 torchao's E2M1 cast then reads. */
static float torch_e4m3_value(uint8_t q)
{
    if ((q & 0x7fu) == 0x7fu)
        return lowp_f32_from_bits(0x7ff00000u | ((uint32_t)(q >> 7) << 31));
    return lowp_decode_f32(LOWP_E4M3, q);
}

static float amax_nan_block(const float *xb, size_t bs)
{
    float m = 0.0f;
    for (size_t i = 0; i < bs; i++) {
        float a = fabsf(xb[i]);
        if (a != a) /* torch.amax over a NaN: the default quiet NaN, not the input's */
            return lowp_f32_from_bits(0x7fc00000u);
        m = a > m ? a : m;
    }
    return m;
}

/* a / b where the library divides a tensor by a Python number b: true division on CPU
 * tensors, a * RN(1/b) under LOWP_BLOCK_CUDA_SCALAR_DIV (torch's CUDA kernel). */
static float torch_div_scalar(const recipe_ctx *c, float a, float b)
{
    return (c->flags & LOWP_BLOCK_CUDA_SCALAR_DIV) ? a * (1.0f / b) : a / b;
}

/* One block: scale code *q, element codes ec[], and v[] the element values before the
 * final clamp (what the counters compare with the largest element). */
static void torch_op_block(const recipe_ctx *c, const float *xb, uint8_t *q, uint8_t *ec, float *v)
{
    const size_t bs = c->bs;
    const int fp4 = c->format != LOWP_MXFP8;
    const float maxpos = fp4 ? 6.0f : 448.0f;
    const float m = amax_nan_block(xb, bs);
    float r = 1.0f; /* element multiplier, or divisor when div */
    int div = 0;
    switch (c->recipe) {
    case LOWP_RECIPE_TORCHAO: { /* nvfp4_quantize, per_tensor_scale = g */
        float s = torch_div_scalar(c, m, 6.0f) / c->gs.dec; /* max_abs / F4_E2M1_MAX */
        s = s < 0x1p-6f ? 0x1p-6f : (s > 448.0f ? 448.0f : s); /* clamp(E4M3_EPS, 448) */
        lowp_encode_f32_u8(&c->torch_e4m3, &s, q, 1);
        r = (1.0f / c->gs.dec) / torch_e4m3_value(*q);
        break;
    }
    case LOWP_RECIPE_TORCHAO_FLOOR:
    case LOWP_RECIPE_TORCHAO_CEIL:
    case LOWP_RECIPE_TORCHAO_EVEN: {
        uint32_t mb = lowp_f32_bits(m);
        if (c->recipe == LOWP_RECIPE_TORCHAO_EVEN && m == m) /* round at the element's mantissa */
            mb = (mb + (1u << (22 - (fp4 ? 1 : 3)))) & 0xff800000u;
        int e = (int)((mb >> 23) & 0xffu) - 127;
        if (c->recipe == LOWP_RECIPE_TORCHAO_CEIL)
            e += (mb & 0x7fffffu) != 0;
        e -= fp4 ? 2 : 8;
        e = e < -127 ? -127 : (e > 128 ? 128 : e); /* clamp(-127, 128) */
        *q = m != m ? 0xff : (uint8_t)(e + 127);
        /* scale_fp32 = bits(q << 23) (255: Inf), clamped at 2^-126 */
        r = *q == 0 ? 0x1p-126f : lowp_f32_from_bits((uint32_t)*q << 23);
        div = 1;
        break;
    }
    case LOWP_RECIPE_TORCHAO_RCEIL: {
        float d = torch_div_scalar(c, m, maxpos); /* _to_mx_rceil: max_abs / max_pos */
        if (d != d) {
            *q = 0xff;
            r = d; /* rcp_fp32 = descale, NaN */
        } else if (isinf(d)) {
            *q = 0xfe;
            r = 0x1p-127f;
        } else {
            float l = ceilf(log2_f32(d));
            l = l < -127.0f ? -127.0f : (l > 127.0f ? 127.0f : l);
            *q = (uint8_t)(l + 127.0f);
            r = *q == 0 ? 1.0f : lowp_f32_pow2(127 - (int)*q);
        }
        break;
    }
    case LOWP_RECIPE_COMPRESSED_TENSORS: {
        /* amax = max(|min(mn, 0)|, |max(mx, 0)|): |x| max, NaN propagating; the NaN comes
         * out as 0xFFFFFFFF on the CPU (torch.aminmax's NaN; measured), 0x7FFFFFFF on CUDA */
        float mc = m != m ? lowp_f32_from_bits((c->flags & LOWP_BLOCK_NAN_CANONICAL) ? 0x7fffffffu : 0xffffffffu) : m;
        if (c->format == LOWP_NVFP4) {
            float s = c->gs.enc * (mc / 6.0f);      /* global_scale * (max / 6) */
            s = clamp_sym(s, 448.0f);               /* round_to_quantized_type_dtype */
            lowp_encode_f32_u8(&c->torch_e4m3, &s, q, 1);
            float qv = torch_e4m3_value(*q);
            if ((*q & 0x7fu) == 0) {                /* scale 0 -> eps of float8_e4m3fn, */
                *q = 0x20;                          /* 0.125 = 2^-3, which is what is stored */
                qv = 0.125f;
            }
            r = qv / c->gs.enc;                     /* _quantize: scale / global_scale */
        } else {
            /* generate_mx_scales: round_to_power_2 at E2M1's mantissa (also for MXFP8):
             * (bits + 2^21) & 0xFF800000 (NaN -> Inf, FLT_MAX -> Inf); code =
             * round(clamp(127 + floor(log2 p2) - offset, 0, 255)); scale 2^(code - 127) */
            float p2 = lowp_f32_from_bits((lowp_f32_bits(mc) + (1u << 21)) & 0xff800000u);
            float e = 127.0f + floorf(log2_f32(p2)) - (fp4 ? 2.0f : 8.0f);
            e = e < 0.0f ? 0.0f : (e > 255.0f ? 255.0f : e);
            *q = (uint8_t)e;
            r = *q == 255 ? INFINITY : lowp_f32_pow2((int)*q - 127);
            /* compress_mx_scale: (127 + floor(log2(Inf)).to(int32)).to(uint8); the cast
             * gives INT_MIN on x86 (cvttss2si): INT_MIN + 127 -> 0x7F; it saturates to
             * INT_MAX on CUDA (cvt.rzi.s32.f32, T6): INT_MAX + 127 wraps to 0x8000007E -> 0x7E */
            if (*q == 255)
                *q = (c->flags & LOWP_BLOCK_CUDA_OPS) ? 0x7e : 0x7f;
        }
        div = 1;
        break;
    }
    default: /* modelopt MX */
        if (fp4) { /* e = ceil(maximum(log2(m / 6), -127)); v = x / exp2(e) */
            float l = log2_f32(torch_div_scalar(c, m, 6.0f)); /* input_amax / E2M1_max */
            l = l != l ? l : (l < -127.0f ? -127.0f : l);
            float e = ceilf(l);
            /* (e + 127).to(uint8) is torch's float -> int64 -> uint8: NaN / Inf give 0 on
             * x86 (cvttsd2si: INT64_MIN); on CUDA (T6) cvt.rzi.s64.f32 gives NaN -> 0 and
             * +Inf -> INT64_MAX -> 0xFF (e is never -Inf: the -127 clamp) */
            *q = isfinite(e) ? (uint8_t)(e + 127.0f)
                             : ((c->flags & LOWP_BLOCK_CUDA_OPS) && e == e ? 0xff : 0);
            r = isfinite(e) ? lowp_f32_pow2((int)e) : (e != e ? e : INFINITY);
            if (e == -127.0f && (c->flags & LOWP_BLOCK_CUDA_OPS))
                r = lowp_f32_from_bits(CUDA_EXP2_M127_BITS); /* torch.exp2(-127) on CUDA */
            div = 1;
        } else { /* e = clamp(ceil(d > 0 ? log2(d) : -127), -127, 127); v = x * exp2(127 - q) */
            float d = torch_div_scalar(c, m, 448.0f); /* amax / E4M3_MAX */
            float e = ceilf(d > 0.0f ? log2_f32(d) : -127.0f);
            e = e < -127.0f ? -127.0f : (e > 127.0f ? 127.0f : e);
            *q = (uint8_t)(e + 127.0f);
            r = lowp_f32_pow2(127 - (int)*q);
        }
        break;
    }
    for (size_t i = 0; i < bs; i++) {
        /* a NaN block factor wins over a NaN element: torch's broadcast multiply / divide
         * returns the factor's NaN (measured: torch 2.15 CPU, vectorized kernels) */
        float vi = device_nan(c, r != r ? r : (div ? xb[i] / r : xb[i] * r));
        v[i] = vi;
        if (c->recipe == LOWP_RECIPE_MODELOPT && fp4) {
            ec[i] = modelopt_mx_e2m1(vi);
        } else if (c->recipe == LOWP_RECIPE_COMPRESSED_TENSORS && fp4) {
            ec[i] = ct_e2m1(c, ct_clamp(c, vi, 6.0f));
        } else if (fp4) {
            /* nvfp4_quantize and _to_mx_rceil clamp to +-6 first; E2M1 saturates anyway */
            ec[i] = torchao_e2m1(vi);
        } else { /* MXFP8: modelopt, torchao (torch.clamp), compressed-tensors (T7 on CUDA) */
            float cv = c->recipe == LOWP_RECIPE_COMPRESSED_TENSORS ? ct_clamp(c, vi, 448.0f)
                                                                   : clamp_sym(vi, 448.0f);
            lowp_encode_f32_u8(&c->torch_e4m3, &cv, &ec[i], 1);
        }
    }
}

static void torch_op_chunk(const recipe_ctx *c, const float *x, size_t n, uint8_t *codes,
                           uint8_t *scales, lowp_quant_counts *k)
{
    float v[CHUNK_ELEMS];
    uint8_t q[LOWP_CHUNK_BLOCKS], ec[CHUNK_ELEMS];
    size_t bs = c->bs, nb = n / bs;
    for (size_t b = 0; b < nb; b++)
        torch_op_block(c, x + b * bs, &q[b], ec + b * bs, v + b * bs);
    if (lowp_format_bits(element_formats[c->format]) == 4)
        for (size_t j = 0; j < n / 2; j++) /* element 2j in the low nibble */
            codes[j] = (uint8_t)((ec[2 * j] & 0xfu) | (ec[2 * j + 1] << 4));
    else
        memcpy(codes, ec, n);
    if (scales != NULL)
        memcpy(scales, q, nb);
    if (k != NULL) {
        count_chunk(c, x, v, ec, q, n, k);
        count_scales(c->format, q, nb, k);
    }
}

static void quantize_chunk(const recipe_ctx *c, const float *restrict x, size_t n,
                           uint8_t *restrict codes, uint8_t *restrict scales, lowp_quant_counts *k)
{
    if (torch_op_recipe(c)) {
        torch_op_chunk(c, x, n, codes, scales, k);
        return;
    }
    float v[CHUNK_ELEMS], factor[LOWP_CHUNK_BLOCKS];
    uint8_t q[LOWP_CHUNK_BLOCKS];
    uint16_t ec16[CHUNK_ELEMS];
    uint8_t ec[CHUNK_ELEMS];
    size_t bs = c->bs, nb = n / bs;
    if (bs > 1) {
        block_scales(c, x, nb, q, factor);
        for (size_t b = 0; b < nb; b++) {
            const float fb = factor[b];
            const float *xb = x + b * bs;
            float *vb = v + b * bs;
            if (c->divide)
                for (size_t i = 0; i < bs; i++)
                    vb[i] = xb[i] / fb;
            else
                for (size_t i = 0; i < bs; i++)
                    vb[i] = xb[i] * fb;
        }
    } else if (c->divide) {
        const float g = c->gs.dec;
        for (size_t i = 0; i < n; i++)
            v[i] = x[i] / g;
    } else {
        memcpy(v, x, n * sizeof *v);
    }
    lowp_format ef = element_formats[c->format];
    if (lowp_format_bits(ef) == 16) {
        lowp_encode_f32_u16(&c->elem, v, ec16, n);
        for (size_t i = 0; i < n; i++) {
            codes[2 * i] = (uint8_t)(ec16[i] & 0xff);
            codes[2 * i + 1] = (uint8_t)(ec16[i] >> 8);
            ec[i] = 0;
        }
    } else {
        lowp_encode_f32_u8(&c->elem, v, ec, n);
        if (c->recipe == LOWP_RECIPE_MODELOPT) /* _cast_fp4: sign_bit = scaled < 0, so -0 and NaN -> + */
            for (size_t i = 0; i < n; i++)
                ec[i] = (uint8_t)((ec[i] & 7u) | ((v[i] < 0.0f) << 3));
        if (lowp_format_bits(ef) == 4)
            for (size_t j = 0; j < n / 2; j++) /* element 2j in the low nibble */
                codes[j] = (uint8_t)(ec[2 * j] | (ec[2 * j + 1] << 4));
        else
            memcpy(codes, ec, n);
    }
    if (bs > 1 && scales != NULL)
        memcpy(scales, q, nb);
    if (k != NULL) {
        if (lowp_format_bits(ef) == 16) {
            /* BF16 passthrough: no scale; count on the decoded values directly. */
            k->elements += n;
            k->blocks += n;
            for (size_t i = 0; i < n; i++) {
                float d = lowp_decode_f32(ef, ec16[i]);
                k->nan_in += isnan(x[i]) != 0;
                k->inf_in += isinf(x[i]) != 0;
                k->nan_out += isnan(d) != 0;
                if (isfinite(x[i]) && x[i] != 0.0f) {
                    k->flushed += d == 0.0f;
                    /* beyond the largest finite BF16 yet rounded to it (below the overflow
                     * threshold): "coded as the largest finite magnitude" */
                    k->saturated += (ec16[i] & 0x7fffu) == 0x7f7fu && fabsf(x[i]) > 0x1.fep127f;
                }
            }
        } else {
            count_chunk(c, x, v, ec, q, n, k);
            count_scales(c->format, q, bs > 1 ? nb : 0, k);
            if (bs == 1)
                k->blocks += n;
        }
    }
}

/* The fused kernel's fallback (block_fast.c): blocks it leaves go through quantize_chunk,
 * which treats every block on its own, so a sub-range gives the bytes and counts it gives
 * as part of a whole chunk. */
typedef struct fallback_arg {
    const recipe_ctx *c;
    const float *x;
    uint8_t *codes, *scales;
    lowp_quant_counts *k;
} fallback_arg;

static void fallback_blocks(void *arg, size_t first, size_t nblocks)
{
    const fallback_arg *a = arg;
    size_t bs = a->c->bs;
    quantize_chunk(a->c, a->x + first * bs, nblocks * bs,
                   a->codes + lowp_block_code_bytes(a->c->format, first * bs),
                   a->scales != NULL ? a->scales + first : NULL, a->k);
}

void lowp_quant_counts_add(lowp_quant_counts *to, const lowp_quant_counts *from)
{
    if (to == NULL)
        return;
    to->elements += from->elements;
    to->blocks += from->blocks;
    to->nan_in += from->nan_in;
    to->inf_in += from->inf_in;
    to->saturated += from->saturated;
    to->flushed += from->flushed;
    to->nan_out += from->nan_out;
    to->scale_zero += from->scale_zero;
    to->scale_subnormal += from->scale_subnormal;
    to->scale_nan += from->scale_nan;
}

int lowp_block_quantize(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned flags,
                        const float *x, size_t n, uint8_t *codes, uint8_t *scales,
                        lowp_quant_counts *counts, char *why, size_t why_len)
{
    return lowp_block_quantize_path(f, r, gs, flags, x, n, codes, scales, counts, why, why_len,
                                    LOWP_BLOCK_PATH_AUTO, NULL);
}

int lowp_block_quantize_path(lowp_block_format f, lowp_recipe r, lowp_global_scale gs,
                             unsigned flags, const float *x, size_t n, uint8_t *codes,
                             uint8_t *scales, lowp_quant_counts *counts, char *why,
                             size_t why_len, int path, size_t *fast_blocks)
{
    if (fast_blocks != NULL)
        *fast_blocks = 0;
    if (lowp_recipe_check(f, r, why, why_len))
        return -1;
    size_t bs = block_sizes[f];
    if (n % bs != 0 || (lowp_format_bits(element_formats[f]) == 4 && n % 2 != 0)) {
        char msg[128];
        snprintf(msg, sizeof msg, "%zu elements is not a multiple of the %s block size %zu", n,
                 block_format_names[f], bs);
        return lowp_why_set(why, why_len, "%s", msg);
    }
    recipe_ctx c;
    if (init_ctx(&c, f, r, gs, flags))
        return lowp_why_set(why, why_len, "internal error: element or scale codec refused");
    /* The fused single-pass kernel (block_fast.c) where the CPU, the format and the
     * recipe's constants allow it; it hands back the blocks it does not handle. */
    lowp_block_fast fp;
    int fast = 0;
    if (path == LOWP_BLOCK_PATH_AUTO && (f == LOWP_NVFP4 || f == LOWP_MXFP4)) {
        memset(&fp, 0, sizeof fp);
        fp.format = f;
        fp.recipe = r;
        fp.scale_up = (flags & LOWP_BLOCK_SCALE_UP) != 0 &&
                      (r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT);
        fp.enc = gs.enc;
        fp.dec = gs.dec;
        fp.rcp6 = c.rcp6;
        fp.rcp_dec = c.rcp_dec;
        fp.factor_of_code = c.factor_of_code;
        fast = lowp_block_fast_init(&fp);
    }
    size_t nchunks = (n + CHUNK_ELEMS - 1) / CHUNK_ELEMS;
    lowp_quant_counts total = {0};
    size_t fast_total = 0;
#pragma omp parallel if (nchunks > 8)
    {
        lowp_quant_counts local = {0};
        size_t local_fast = 0;
#pragma omp for schedule(static)
        for (long k = 0; k < (long)nchunks; k++) {
            size_t lo = (size_t)k * CHUNK_ELEMS;
            size_t len = n - lo < CHUNK_ELEMS ? n - lo : CHUNK_ELEMS;
            uint8_t *ck = codes + lowp_block_code_bytes(f, lo);
            uint8_t *sk = scales != NULL ? scales + lo / bs : NULL;
            if (fast) {
                fallback_arg a = {&c, x + lo, ck, sk, counts ? &local : NULL};
                local_fast += lowp_block_fast_quantize(&fp, x + lo, len / bs, ck, sk, a.k,
                                                       fallback_blocks, &a);
            } else {
                quantize_chunk(&c, x + lo, len, ck, sk, counts ? &local : NULL);
            }
        }
        if (counts != NULL || fast_blocks != NULL) {
#pragma omp critical(lowp_block_counts)
            {
                lowp_quant_counts_add(&total, &local);
                fast_total += local_fast;
            }
        }
    }
    if (counts != NULL)
        lowp_quant_counts_add(counts, &total);
    if (fast_blocks != NULL)
        *fast_blocks = fast_total;
    return 0;
}

/* ---- dequantize ---------------------------------------------------------------- */

uint16_t lowp_block_code_at(lowp_block_format f, const uint8_t *codes, size_t i)
{
    switch (lowp_format_bits(element_formats[f])) {
    case 4: return (uint16_t)((codes[i / 2] >> (4 * (i & 1))) & 0xfu);
    case 16: return (uint16_t)(codes[2 * i] | (codes[2 * i + 1] << 8));
    default: return codes[i];
    }
}

void lowp_block_dequantize_f64(lowp_block_format f, float global_scale, const uint8_t *codes,
                               const uint8_t *scales, size_t n, double *out)
{
    lowp_format ef = element_formats[f];
    size_t bs = block_sizes[f];
    double g = lowp_block_has_global_scale(f) ? (double)global_scale : 1.0;
    lowp_format sf = f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0;
#pragma omp parallel for schedule(static) if (n > ((size_t)1 << 16))
    for (long i = 0; i < (long)n; i++) {
        double s = lowp_block_has_scales(f) ? lowp_decode_f64(sf, scales[(size_t)i / bs]) : 1.0;
        /* exact: at most 4 x 4 x 24 significand bits */
        out[i] = lowp_decode_f64(ef, lowp_block_code_at(f, codes, (size_t)i)) * s * g;
    }
}

void lowp_block_dequantize_f32(lowp_block_format f, float global_scale, const uint8_t *codes,
                               const uint8_t *scales, size_t n, float *out)
{
    lowp_format ef = element_formats[f];
    size_t bs = block_sizes[f];
    double g = lowp_block_has_global_scale(f) ? (double)global_scale : 1.0;
    lowp_format sf = f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0;
#pragma omp parallel for schedule(static) if (n > ((size_t)1 << 16))
    for (long i = 0; i < (long)n; i++) {
        double s = lowp_block_has_scales(f) ? lowp_decode_f64(sf, scales[(size_t)i / bs]) : 1.0;
        out[i] = (float)(lowp_decode_f64(ef, lowp_block_code_at(f, codes, (size_t)i)) * s * g);
    }
}
