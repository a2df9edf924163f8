/* gpu/kernels/kv_write.cu: quantize-on-write into a paged GPU KV cache (lowp/gpu_kvcache.h).
 *
 * One thread writes a share: 4 consecutive elements of one (token, head) row of K or V
 * (narrow; the shares of one quantization block, NVFP4 16 or MX 32 elements, join their
 * amax by warp shuffles) or a whole block (wide, for writes long enough to fill the GPU
 * without splitting blocks): kvw_share, KVW_NARROW. K and V are one launch (grid y); the
 * format, recipe, block and share sizes are template constants (kvw_dispatch: a kernel per
 * supported format and recipe, so the recipe's switches and codec settings fold; sm_90
 * SASS of the NVFP4 sglang-kv narrow kernel 1,264 instructions, 2,512 when they were
 * run-time values).
 * It reads the inputs, computes the block scale and element codes, and stores them at the
 * byte offsets of ref/kvcache/src/kvcache.c (lowp_kvcache_code_offset / lowp_kvcache_scale_offset).
 *
 * Bit-exactness with the CPU writer. Every arithmetic step below names the step of
 * ref/block/src/block.c it mirrors (init_ctx, code_factor, block_amax, block_scales,
 * quantize_chunk) and is the same binary32 operation in the same order:
 *   - this file is compiled with --fmad=false, and has no a*b+c anyway;
 *   - no fast math: '/' is IEEE division, no flush to zero (nvcc defaults -prec-div=true,
 *     -ftz=false; gpu/kv_write.cmake passes them explicitly);
 *   - rcp.approx.ftz.f32 is the PTX instruction on the device and lowp_rcp_approx_ftz (its
 *     bit-exact model on sm_90) on the host;
 *   - the element and scale conversions and the E4M3 / E8M0 decodes are the CPU codec's
 *     own code: the integer-only core lowp/codec_core.h (lowp_encode_core_signed,
 *     lowp_encode_core_e8m0, lowp_decode_core_*), which ref/codec/src/format.c and
 *     format_array.c call as well, here with the settings lowp_codec_init resolves for the
 *     codecs init_ctx chooses (E2M1 elements by integer rounding, encode_e2m1.h, equal
 *     to that core on all 2^32 inputs); so no PTX cvt (E2M1/UE8M0 cvt does not exist on sm_90) and
 *     no host/device difference;
 *   - NaN signs and payloads never reach a byte: the CPU makes a NaN block scale input
 *     positive (block_scales, "GPU's canonical positive NaN"), and every element and scale
 *     codec used here maps both NaN signs of an element to one code.
 * The functions are __host__ __device__: lowp_gpu_kv_write_emulate runs them on the CPU,
 * so a logic error shows up on machines without a GPU.
 */
#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include <cuda_runtime.h>

#include "lowp/codec_core.h"
#include "lowp/gpu_kvcache.h"
#include "lowp/why.h"
#include "div32.h"
#include "encode_e2m1.h"

#define HD __host__ __device__ __forceinline__

namespace { /* everything up to the host API is internal to this file */

/* ---------------------------------------------------------------- bit helpers */

/* The bit casts and 2^k (pow2f of block.c) are the codec's: lowp_f32_bits,
 * lowp_f32_from_bits, lowp_f32_pow2 (lowp/codec_core.h). */

/* The positive quiet NaN the CPU's NAN constant is (block_amax, code_factor). */
HD float qnan(void) { return lowp_f32_from_bits(0x7fc00000u); }

/* rcp~: rcp.approx.ftz.f32 (recipes.md); lowp_rcp_approx_ftz is its model, bit-exact on
 * all 2^32 inputs on the H200 (reports/rcp-approx-h200.md). */
HD float rcp_approx(float x)
{
#ifdef __CUDA_ARCH__
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return lowp_rcp_approx_ftz(x);
#endif
}

/* ---------------------------------------------------------------- codecs */

/* The settings lowp_codec_init resolves for one (format, profile, mode, saturation), as
 * far as lowp_encode_core_signed reads them (NaN rule LOWP_NAN_FIXED for all used here). */
struct enc_spec {
    int ru;            /* 1: LOWP_RU, 0: LOWP_RN (a flag, not the mode: see encode_signed) */
    int mbits, emin;   /* stored fraction bits, 1 - bias */
    uint16_t max_mag;  /* lowp_format_table max_mag */
    uint16_t sign_bit;
    uint16_t ovf_mag;  /* codec ovf_mag */
    uint16_t inf_mag;  /* codec inf_mag */
    uint16_t nan_pos, nan_neg; /* codec nan_code[0], nan_code[1] */
};

/* (e2m1, cuda, rn, sat): the element codec of NVFP4 and MXFP4. */
HD enc_spec spec_e2m1_cuda(void) { return enc_spec{0, 1, 0, 0x7u, 0x8u, 0x7u, 0x7u, 0x7u, 0x7u}; }
/* (e4m3, cuda, rn, sat): MXFP8 / FP8 elements, the NVFP4 block scale (trtllm, exact,
 * sglang-kv). */
HD enc_spec spec_e4m3_cuda(void) { return enc_spec{0, 3, -6, 0x7eu, 0x80u, 0x7eu, 0x7eu, 0x7fu, 0x7fu}; }
/* (e5m2, cuda, rn, sat): FP8 E5M2 elements. */
HD enc_spec spec_e5m2_cuda(void) { return enc_spec{0, 2, -14, 0x7bu, 0x80u, 0x7bu, 0x7bu, 0x7fu, 0x7fu}; }
/* (bf16, cuda, rn, no saturation): BF16 passthrough; NaN -> 0x7FFF. */
HD enc_spec spec_bf16_cuda(void)
{
    return enc_spec{0, 7, -126, 0x7f7fu, 0x8000u, 0x7f80u, 0x7f80u, 0x7fffu, 0x7fffu};
}
/* (e4m3, ocp, ru, sat): NVFP4 exact with LOWP_BLOCK_SCALE_UP. */
HD enc_spec spec_e4m3_ocp_ru_sat(void) { return enc_spec{1, 3, -6, 0x7eu, 0x80u, 0x7eu, 0x7eu, 0x7fu, 0xffu}; }
/* (e4m3, torch, rn, no saturation): NVFP4 modelopt; beyond 464 -> NaN keeping the sign. */
HD enc_spec spec_e4m3_torch(void) { return enc_spec{0, 3, -6, 0x7eu, 0x80u, 0x7fu, 0x7fu, 0x7fu, 0xffu}; }
/* (e4m3, ocp, ru, no saturation): NVFP4 modelopt with LOWP_BLOCK_SCALE_UP. */
HD enc_spec spec_e4m3_ocp_ru_nosat(void) { return enc_spec{1, 3, -6, 0x7eu, 0x80u, 0x7fu, 0x7fu, 0x7fu, 0xffu}; }

/* lowp_encode_f32 of the codec c describes, on binary32 bits b: the codec's own core.
 * The format's Inf code is read only by the payload NaN rules, which no codec here has.
 * The mode reaches the core as c.ru ? LOWP_RU : LOWP_RN: nvcc turns the core's switches on
 * it into selects on c.ru (a stored mode compiles to jump tables, 40 instructions more). */
HD uint32_t encode_signed(const enc_spec &c, uint32_t b)
{
    return lowp_encode_core_signed(b, c.ru ? LOWP_RU : LOWP_RN, c.mbits, c.emin, c.max_mag,
                                   c.sign_bit, 0u, c.ovf_mag, c.inf_mag, LOWP_NAN_FIXED, c.nan_pos,
                                   c.nan_neg);
}

/* lowp_encode_f32 for (e8m0, cuda, ru, sat): code = biased exponent, +1 when any
 * fraction bit is set (a subnormal rounds up past 2^-127 only above it), 0xFE at most,
 * 0 for +-0, |x| for negatives, 0xFF for NaN (lowp_codec_init's e8m0_zero_code 0,
 * e8m0_neg_is_nan 0 and e8m0_sub_up_any 0 for the cuda profile). */
HD uint32_t encode_e8m0_cuda_ru_sat(uint32_t b)
{
    return lowp_encode_core_e8m0(b, LOWP_RU, 1, 0u, 0, 0);
}

/* lowp_decode_f32(LOWP_E4M3, q): exact; 0x7F / 0xFF are NaN (their sign never matters
 * here: every use multiplies or divides it into an element code that ignores NaN signs). */
HD float decode_e4m3(uint32_t q) { return lowp_decode_core_signed(q, 8, 3, -6, 0u, 0x7fu); }

/* lowp_decode_f32(LOWP_E8M0, q): 2^(q - 127), NaN for 0xFF. */
HD float decode_e8m0(uint32_t q) { return lowp_decode_core_e8m0(q); }

/* ---------------------------------------------------------------- recipes */

/* recipe_ctx of block.c, for one global scale. */
struct qctx {
    int format, recipe;
    float dec, enc;                       /* lowp_global_scale_from_dec: {g, 1/g} */
    float rcp6, rcp448, rcp_enc, rcp_dec; /* init_ctx: rcp~ constants */
    enc_spec elem, scale;                 /* element and (E4M3) block scale codecs */
    int divide;                           /* elements are x / factor */
};

/* init_ctx + lowp_global_scale_from_dec(f, r, g). */
HD void qctx_init(qctx *c, int f, int r, unsigned flags, float g)
{
    c->format = f;
    c->recipe = r;
    c->dec = g;
    c->enc = 1.0f / g;
    switch (f) {
    case LOWP_NVFP4:
    case LOWP_MXFP4: c->elem = spec_e2m1_cuda(); break;
    case LOWP_MXFP8:
    case LOWP_FP8_E4M3: c->elem = spec_e4m3_cuda(); break;
    case LOWP_FP8_E5M2: c->elem = spec_e5m2_cuda(); break;
    default: c->elem = spec_bf16_cuda(); break;
    }
    /* the round-up flag is a step of exact and modelopt only */
    int up = (flags & LOWP_BLOCK_SCALE_UP) != 0 &&
             (r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT);
    if (r == LOWP_RECIPE_MODELOPT)
        c->scale = up ? spec_e4m3_ocp_ru_nosat() : spec_e4m3_torch();
    else
        c->scale = up ? spec_e4m3_ocp_ru_sat() : spec_e4m3_cuda();
    if (f == LOWP_NVFP4)
        c->divide = r == LOWP_RECIPE_MODELOPT;
    else if (f == LOWP_MXFP4 || f == LOWP_MXFP8)
        c->divide = r == LOWP_RECIPE_RCEIL;
    else
        c->divide = f != LOWP_BF16_PASS;
    c->rcp6 = rcp_approx(6.0f);
    c->rcp448 = rcp_approx(448.0f);
    c->rcp_enc = rcp_approx(c->enc);
    c->rcp_dec = rcp_approx(c->dec);
}

/* code_factor: the element multiplier (or divisor when c->divide) of a block whose scale
 * code is q and whose amax is nonzero. */
HD float code_factor(const qctx *c, uint32_t q)
{
    if (c->format == LOWP_NVFP4) {
        float qv = decode_e4m3(q);
        switch (c->recipe) {
        case LOWP_RECIPE_TRTLLM: return rcp_approx(qv * c->rcp_enc);
        case LOWP_RECIPE_EXACT: return fminf(1.0f / (qv * (1.0f / c->enc)), FLT_MAX);
        case LOWP_RECIPE_MODELOPT: return qv * c->dec; /* the divisor */
        default: return rcp_approx(qv * c->dec);        /* sglang-kv */
        }
    }
    /* MXFP4 / MXFP8 */
    switch (c->recipe) {
    case LOWP_RECIPE_OCP: return q == 0xffu ? qnan() : lowp_f32_pow2(127 - (int)q);
    case LOWP_RECIPE_RCEIL: return decode_e8m0(q); /* the divisor */
    default: /* trtllm; MXFP4's exp2f_rcp gives 1.0 for code 0x00 (TRT-LLM's quirk) */
        if (c->format == LOWP_MXFP4)
            return q == 0 ? 1.0f : lowp_f32_pow2(127 - (int)q);
        return rcp_approx(decode_e8m0(q));
    }
}

/* block_amax, one thread's share: the largest |x| of its n elements, NaN ignored (a NaN
 * compares false), and whether one was NaN. Shares join with amax_join in any order: the
 * result is the maximum of a set of non-negative non-NaN values (fabsf makes -0 +0), and
 * an OR. */
struct amax_t {
    float m;
    int nan;
};
template <int N> HD amax_t part_amax(const float *x)
{
    amax_t r = {0.0f, 0};
    for (int i = 0; i < N; i++) {
        float a = fabsf(x[i]);
        r.nan |= a != a;
        r.m = a > r.m ? a : r.m;
    }
    return r;
}
HD amax_t amax_join(amax_t a, amax_t b)
{
    a.nan |= b.nan;
    a.m = b.m > a.m ? b.m : a.m;
    return a;
}

/* block_amax's result + block_scales: the scale code *q of a block whose share-joined
 * amax is a, and its element factor (multiplier, or divisor when c->divide). */
HD void block_scale(const qctx *c, amax_t a, uint32_t *qo, float *factor_o)
{
    const int r = c->recipe;
    /* block_amax: NaN ignored (fmaxf) or propagated (torch.amax) */
    int propagate = r == LOWP_RECIPE_MODELOPT || r == LOWP_RECIPE_OCP || r == LOWP_RECIPE_RCEIL;
    const float amax = (propagate && a.nan) ? qnan() : a.m;
    uint32_t q;
    float factor;
    if (c->format != LOWP_NVFP4 && r == LOWP_RECIPE_OCP) {
        /* block_scales, ocp: floor(log2 amax) - emax from the exponent bits; subnormal and
         * zero amax count as -127; code clamped at 0; NaN and Inf amax give 0xFF */
        const int emax = c->format == LOWP_MXFP4 ? 2 : 8;
        uint32_t mb = lowp_f32_bits(amax);
        int biased = (int)((mb >> 23) & 0xffu);
        int code = biased == 0 ? 0 : biased - emax;
        code = code < 0 ? 0 : code;
        q = biased == 0xff ? 0xffu : (uint32_t)code;
        factor = code_factor(c, q);
    } else {
        float sf;
        if (c->format == LOWP_NVFP4) {
            switch (r) {
            case LOWP_RECIPE_TRTLLM: sf = c->enc * (amax * c->rcp6); break;
            case LOWP_RECIPE_EXACT: {
                const float k = c->enc * (1.0f / 6.0f);
                sf = amax != 0.0f ? amax * k : 0.0f;
                break;
            }
            case LOWP_RECIPE_MODELOPT: {
                const float six_g = 6.0f * c->dec;
                float s = amax / six_g;
                s = s == 0.0f ? 1.0f : s;
                s = s < 0x1p-9f ? 0x1p-9f : s; /* clamp(min=2**-9, max=448); NaN compares false */
                sf = s > 448.0f ? 448.0f : s;
                break;
            }
            default: sf = c->rcp_dec * (amax * c->rcp6); break; /* sglang-kv */
            }
            /* a NaN from the arithmetic is the GPU's canonical positive NaN */
            sf = sf != sf ? fabsf(sf) : sf;
            q = encode_signed(c->scale, lowp_f32_bits(sf));
        } else {
            if (r == LOWP_RECIPE_RCEIL)
                sf = amax * (c->format == LOWP_MXFP4 ? 1.0f / 6.0f : 1.0f / 448.0f);
            else /* trtllm MX */
                sf = amax * (c->format == LOWP_MXFP4 ? c->rcp6 : c->rcp448);
            q = encode_e8m0_cuda_ru_sat(lowp_f32_bits(sf));
        }
        /* zero_amax_zero_factor (trtllm, exact, sglang-kv): an all-zero block gets factor 0 */
        int zero_rule = r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_SGLANG_KV;
        factor = (zero_rule && amax == 0.0f) ? 0.0f : code_factor(c, q);
    }
    *qo = q;
    *factor_o = factor;
}

/* quantize_chunk for n elements of a block: scale, then the element codec. E2M1 (NVFP4,
 * MXFP4) by integer rounding (encode_e2m1.h, equal to the codec core on all 2^32 inputs:
 * tests/test_encode_e2m1.c), E4M3 (MXFP8) by the codec core. */
template <int N> HD void encode_part(const qctx *c, float factor, const float *x, uint8_t *ec)
{
    const int e2m1 = c->format != LOWP_MXFP8;
    for (int i = 0; i < N; i++) {
        float v = c->divide ? x[i] / factor : x[i] * factor;
        uint32_t code = e2m1 ? lowp_enc_e2m1_rn_sat(lowp_f32_bits(v))
                             : encode_signed(c->elem, lowp_f32_bits(v));
        if (c->recipe == LOWP_RECIPE_MODELOPT) /* _cast_fp4: sign bit = (scaled < 0): -0, NaN -> + */
            code = (code & 7u) | ((uint32_t)(v < 0.0f) << 3);
        ec[i] = (uint8_t)code;
    }
}

/* ---------------------------------------------------------------- placement */

/* A thread quantizes a share: P consecutive elements of one row, loaded and stored as
 * words. Two share sizes, chosen per launch (kvw_wide):
 *   narrow  P = 4: a quarter of an NVFP4 block, an eighth of an MX block, four FP8 / BF16
 *           elements, so that a short write (a decode step's tokens) still fills the
 *           GPU: one thread a block leaves it a few threads an SM, its time one thread's
 *           serial encodes. The G = BS / P
 *           threads of a block join their amax shares by shuffles; each computes the
 *           block's scale (the same arithmetic on the same amax, so the same value) and
 *           encodes its own elements; the first stores the scale.
 *   wide    P = BS (a whole block; 16 for FP8 / BF16): when the write has threads for
 *           the whole GPU anyway, the per-thread work that does not scale with P (index
 *           arithmetic, the recipe's constants, the block scale: about 450 instructions on
 *           the H200, Nsight Compute of an 8K-token NVFP4 write) is paid once a block
 *           instead of G times.
 * Element-wise formats whose dims are not multiples of 4 (16) take P = 1 (4). */
#define KVW_NARROW 4

/* Everything one launch (K or V) needs; plain data, passed by value. */
struct kvw_side {
    int format, recipe;
    unsigned flags;
    int hnd;        /* layout HND */
    int interleave; /* scale order INTERLEAVE4 */
    int in_e4m3;    /* input type: E4M3 codes (else BF16 bits) */
    int vec_in, vec_out; /* x, codes aligned for P-element loads / stores (kvw_vec) */
    size_t num_pages, page_size, num_heads;
    size_t dim, rb, S, bs; /* row elements, code bytes, scales; block size */
    size_t n_tokens;
    lowp_div32 d_parts, d_heads, d_page; /* by parts a row (dim / P), num_heads, page_size */
    const void *x;
    const int64_t *slots;
    uint8_t *codes, *scales;
    const float *gdec; /* decode-side global scales, n_global of them */
    size_t n_global;
};

/* Input element i of the [n_tokens][num_heads][dim] array, as its exact binary32 value. */
HD float load_input(const kvw_side &p, size_t i)
{
    if (p.in_e4m3)
        return decode_e4m3(((const uint8_t *)p.x)[i]);
    return lowp_f32_from_bits((uint32_t)((const uint16_t *)p.x)[i] << 16);
}

/* N (4 or 8) bytes at the N-aligned src as little-endian words w[0], w[1]: one load on the
 * device; memcpy on the host (no aliasing of the caller's arrays). */
template <int N> HD void word_load(const uint8_t *src, uint32_t *w)
{
#ifdef __CUDA_ARCH__
    if (N == 4) {
        w[0] = *(const uint32_t *)src;
    } else {
        const uint2 v = *(const uint2 *)src;
        w[0] = v.x;
        w[1] = v.y;
    }
#else
    memcpy(w, src, N);
#endif
}

/* Inputs i .. i + P - 1 (i a multiple of P): 4-element words when p.vec_in, else one
 * by one. */
template <int P> HD void load_part(const kvw_side &p, size_t i, float *x)
{
    if (P % 4 == 0 && p.vec_in) {
        for (int q = 0; q < P; q += 4) {
            uint32_t w[2];
            if (p.in_e4m3) {
                word_load<4>((const uint8_t *)p.x + i + q, w);
                for (int k = 0; k < 4; k++)
                    x[q + k] = decode_e4m3((w[0] >> (8 * k)) & 0xffu);
            } else {
                word_load<8>((const uint8_t *)p.x + 2 * (i + q), w);
                for (int k = 0; k < 4; k++)
                    x[q + k] = lowp_f32_from_bits(k & 1 ? w[k >> 1] & 0xffff0000u : w[k >> 1] << 16);
            }
        }
        return;
    }
    for (int k = 0; k < P; k++)
        x[k] = load_input(p, i + k);
}

/* n bytes b[0..n) at dst: when p.vec_out one store of n bytes (n = 2, 4) or n / 8 stores
 * of 8 (n a multiple of 8), else byte by byte. */
template <int N> HD void store_bytes(const kvw_side &p, uint8_t *dst, const uint8_t *b)
{
    if (p.vec_out && (N == 2 || N == 4 || N % 8 == 0)) {
#ifdef __CUDA_ARCH__
        for (int q = 0; q < N; q += 8) {
            uint64_t w = 0;
            for (int k = 0; k < (N < 8 ? N : 8); k++)
                w |= (uint64_t)b[q + k] << (8 * k);
            if (N == 2)
                *(uint16_t *)dst = (uint16_t)w;
            else if (N == 4)
                *(uint32_t *)dst = (uint32_t)w;
            else
                *(uint64_t *)(dst + q) = w;
        }
#else
        memcpy(dst, b, N);
#endif
        return;
    }
    for (int k = 0; k < N; k++)
        dst[k] = b[k];
}

/* Row index of (page, slot, head) in a [..][row] buffer: lowp_kvcache_code_offset. */
HD size_t row_index(const kvw_side &p, size_t page, size_t slot, size_t head)
{
    return p.hnd ? (page * p.num_heads + head) * p.page_size + slot
                 : (page * p.page_size + slot) * p.num_heads + head;
}

/* n / d: by multiply and shift (dm, made by kvw_div_make) for the 32-bit index type (every
 * dividend and divisor < 2^31 there: kvw_fits32), by division for size_t. */
HD uint32_t kvw_div(const lowp_div32 &dm, size_t, uint32_t n) { return lowp_div32_q(dm, n); }
HD size_t kvw_div(const lowp_div32 &, size_t d, size_t n) { return n / d; }

/* kvw_div's multiplier for d (a divisor of the size_t path only, >= 2^31, gets a
 * placeholder). */
static inline lowp_div32 kvw_div_make(size_t d)
{
    return lowp_div32_make(d <= INT32_MAX ? (uint32_t)d : 1u);
}

/* Where thread share t (P elements) goes. t = row * (dim / P) + e0 / P with row =
 * token * num_heads + head: its elements are e0 .. e0 + P - 1 of (token, head), in block
 * e0 / BS (BS >= P; for BS = 1 every element is its own unit). ok = 0 for a padding
 * slot (-1, skipped) or one outside the cache (never written). Mirrors
 * lowp_kvcache_write: the row quantized with that head's global scale, codes at
 * lowp_kvcache_code_offset + the element's code bytes, scales at
 * lowp_kvcache_scale_offset. I is uint32_t when kvw_fits32 allows, else size_t (the
 * arithmetic is the same). */
template <int BS, int P, typename I> struct kvw_loc {
    int ok;
    I page, sip, head, e0;
    size_t in0;   /* input element index of e0 */
    uint8_t *row; /* the row's first code byte */
};
template <int BS, int P, typename I> HD kvw_loc<BS, P, I> kvw_locate(const kvw_side &p, I t)
{
    kvw_loc<BS, P, I> l;
    const I row = kvw_div(p.d_parts, p.dim / P, t);
    l.e0 = (t - row * (I)(p.dim / P)) * P;
    const I tok = kvw_div(p.d_heads, p.num_heads, row);
    l.head = row - tok * (I)p.num_heads;
    l.in0 = (size_t)row * p.dim + l.e0;
    const int64_t slot = p.slots[tok];
    /* padding (-1) is skipped; a slot outside the cache is never written */
    l.ok = slot >= 0 && (uint64_t)slot < (uint64_t)(p.num_pages * p.page_size);
    l.page = l.ok ? kvw_div(p.d_page, p.page_size, (I)slot) : 0;
    l.sip = l.ok ? (I)slot - l.page * (I)p.page_size : 0;
    l.row = p.codes + row_index(p, l.page, l.sip, l.head) * p.rb;
    return l;
}

/* qctx of the head a location writes (its global scale), for format F and recipe R: the
 * launch's p.format and p.recipe as template constants (kvw_dispatch), so that every
 * switch on them in qctx_init, block_scale, code_factor and encode_part, and the codec
 * settings they pick (the element's and the block scale's enc_spec), fold at compile
 * time; the CPU writer's steps are the same, only their selection is not made per
 * element. R is -1 for the element-wise formats, where the recipe does not act. */
template <int F, int R, int BS, int P, typename I>
HD qctx kvw_ctx(const kvw_side &p, const kvw_loc<BS, P, I> &l)
{
    qctx c;
    qctx_init(&c, F, R, p.flags, p.gdec[p.n_global == 1 ? 0 : l.head]);
    return c;
}

/* Element-wise formats (BS = 1): FP8 x / g (true division); BF16 x as is (quantize_chunk,
 * bs == 1); the codes of elements e0 .. e0 + P - 1 stored. */
template <int F, int P, typename I>
HD void kvw_elementwise(const kvw_side &p, const kvw_loc<1, P, I> &l)
{
    float x[P];
    load_part<P>(p, l.in0, x);
    const qctx c = kvw_ctx<F, -1>(p, l);
    if (F == LOWP_BF16_PASS) { /* two bytes, little-endian */
        uint8_t b[2 * P];
        for (int k = 0; k < P; k++) {
            const uint32_t code = encode_signed(c.elem, lowp_f32_bits(x[k]));
            b[2 * k] = (uint8_t)(code & 0xffu);
            b[2 * k + 1] = (uint8_t)(code >> 8);
        }
        store_bytes<2 * P>(p, l.row + 2 * (size_t)l.e0, b);
    } else {
        uint8_t b[P];
        for (int k = 0; k < P; k++)
            b[k] = (uint8_t)encode_signed(c.elem, lowp_f32_bits(c.divide ? x[k] / c.dec : x[k]));
        store_bytes<P>(p, l.row + l.e0, b);
    }
}

/* Block formats, after the shares' amax is joined into a: the block's scale, the codes of
 * this thread's P elements, and (by the block's first share) the scale byte. */
template <int F, int BS, int P, typename I>
HD void kvw_block_part(const kvw_side &p, const kvw_loc<BS, P, I> &l, const qctx &c,
                       const float *x, amax_t a)
{
    uint32_t q;
    float factor;
    block_scale(&c, a, &q, &factor);
    uint8_t ec[P];
    encode_part<P>(&c, factor, x, ec);
    if (F == LOWP_MXFP8) {
        store_bytes<P>(p, l.row + l.e0, ec);
    } else { /* 4-bit codes, element 2j in the low nibble */
        uint8_t b[P / 2];
        for (int j = 0; j < P / 2; j++)
            b[j] = (uint8_t)(ec[2 * j] | (ec[2 * j + 1] << 4));
        store_bytes<P / 2>(p, l.row + l.e0 / 2, b);
    }
    if (l.e0 % BS == 0) {
        /* lowp_kvcache_scale_offset: (t, s) -> interleaved (t', s') within the page's tile */
        const I blk = l.e0 / BS;
        I t = l.sip, s = blk;
        if (p.interleave) {
            const I qq = (I)(p.S / 4);
            t = (l.sip / 4) * 4 + blk / qq;
            s = (blk % qq) * 4 + l.sip % 4;
        }
        p.scales[row_index(p, l.page, t, l.head) * p.S + s] = (uint8_t)q;
    }
}

/* Whether side p's share indices and slots fit kvw_div's 32-bit path: shares below 2^31,
 * so that t + the grid stride (at most 2^28) cannot wrap, and slots below 2^31. */
static inline bool kvw_fits32(const kvw_side &p, size_t shares)
{
    return shares <= INT32_MAX && p.num_pages * p.page_size <= INT32_MAX;
}

/* Every share of side p (the host emulation), the kernel's functions in the kernel's
 * order; a block's G shares are loaded and their amax joined first, as the shuffles do. */
template <int F, int R, int BS, int P, typename I>
static void kvw_host_shares(const kvw_side &p, size_t shares)
{
    if constexpr (BS == 1) {
        for (size_t t = 0; t < shares; t++) {
            const kvw_loc<1, P, I> l = kvw_locate<1, P, I>(p, (I)t);
            if (l.ok)
                kvw_elementwise<F, P, I>(p, l);
        }
    } else {
        constexpr int G = BS / P;
        for (size_t t0 = 0; t0 < shares; t0 += G) {
            float x[G][P];
            kvw_loc<BS, P, I> l[G];
            amax_t a = {0.0f, 0};
            for (int g = 0; g < G; g++) {
                l[g] = kvw_locate<BS, P, I>(p, (I)(t0 + g));
                load_part<P>(p, l[g].in0, x[g]);
                a = amax_join(a, part_amax<P>(x[g]));
            }
            if (!l[0].ok)
                continue;
            const qctx c = kvw_ctx<F, R>(p, l[0]);
            for (int g = 0; g < G; g++)
                kvw_block_part<F, BS, P, I>(p, l[g], c, x[g], a);
        }
    }
}

/* f(F, R, BS, P), each a std::integral_constant: the launch's format and recipe (those
 * lowp_gpu_kv_recipe_check accepts; R = -1 for the element-wise formats), its block size
 * and the share size P (kvw_p's results). Returns -1, calling nothing, for a pair there is
 * no kernel for (a refused recipe; the callers check it first). */
template <typename F> static int kvw_dispatch(int format, int recipe, int P, F f)
{
    using std::integral_constant;
    auto by_p = [&](auto fm, auto rc, auto bs) {
        constexpr int BS = decltype(bs)::value;
        if (P == 4)
            f(fm, rc, bs, integral_constant<int, 4>{});
        else if constexpr (BS == 1) {
            if (P == 16)
                f(fm, rc, bs, integral_constant<int, 16>{});
            else
                f(fm, rc, bs, integral_constant<int, 1>{});
        } else
            f(fm, rc, bs, integral_constant<int, BS>{});
    };
    auto nvfp4 = [&](auto rc) {
        by_p(integral_constant<int, LOWP_NVFP4>{}, rc, integral_constant<int, 16>{});
    };
    auto mx = [&](auto fm, auto rc) { by_p(fm, rc, integral_constant<int, 32>{}); };
    auto mx_recipe = [&](auto fm) {
        switch (recipe) {
        case LOWP_RECIPE_OCP: mx(fm, integral_constant<int, LOWP_RECIPE_OCP>{}); return 0;
        case LOWP_RECIPE_RCEIL: mx(fm, integral_constant<int, LOWP_RECIPE_RCEIL>{}); return 0;
        case LOWP_RECIPE_TRTLLM: mx(fm, integral_constant<int, LOWP_RECIPE_TRTLLM>{}); return 0;
        default: return -1;
        }
    };
    auto elementwise = [&](auto fm) {
        by_p(fm, integral_constant<int, -1>{}, integral_constant<int, 1>{});
        return 0;
    };
    switch (format) {
    case LOWP_NVFP4:
        switch (recipe) {
        case LOWP_RECIPE_TRTLLM: nvfp4(integral_constant<int, LOWP_RECIPE_TRTLLM>{}); return 0;
        case LOWP_RECIPE_EXACT: nvfp4(integral_constant<int, LOWP_RECIPE_EXACT>{}); return 0;
        case LOWP_RECIPE_MODELOPT: nvfp4(integral_constant<int, LOWP_RECIPE_MODELOPT>{}); return 0;
        case LOWP_RECIPE_SGLANG_KV: nvfp4(integral_constant<int, LOWP_RECIPE_SGLANG_KV>{}); return 0;
        default: return -1;
        }
    case LOWP_MXFP4: return mx_recipe(integral_constant<int, LOWP_MXFP4>{});
    case LOWP_MXFP8: return mx_recipe(integral_constant<int, LOWP_MXFP8>{});
    case LOWP_FP8_E4M3: return elementwise(integral_constant<int, LOWP_FP8_E4M3>{});
    case LOWP_FP8_E5M2: return elementwise(integral_constant<int, LOWP_FP8_E5M2>{});
    case LOWP_BF16_PASS: return elementwise(integral_constant<int, LOWP_BF16_PASS>{});
    default: return -1;
    }
}

template <typename I> static int kvw_host_side(const kvw_side &p, size_t shares, int P)
{
    return kvw_dispatch(p.format, p.recipe, P, [&](auto fm, auto rc, auto bs, auto pp) {
        kvw_host_shares<decltype(fm)::value, decltype(rc)::value, decltype(bs)::value,
                        decltype(pp)::value, I>(p, shares);
    });
}

/* One share on the device: kvw_host_shares's steps, the amax joined over the block's G
 * lanes by xor shuffles (the shares of a block are G consecutive lanes, G divides 32, and
 * a block's lanes agree on ok: one token's row). */
template <int F, int R, int BS, int P, typename I>
__device__ __forceinline__ void kvw_share(const kvw_side &p, I t)
{
    const kvw_loc<BS, P, I> l = kvw_locate<BS, P, I>(p, t);
    if (!l.ok)
        return;
    if constexpr (BS == 1) {
        kvw_elementwise<F, P, I>(p, l);
    } else {
        constexpr int G = BS / P;
        float x[P];
        load_part<P>(p, l.in0, x);
        amax_t a = part_amax<P>(x);
        const unsigned lane = threadIdx.x & 31u;
        const unsigned mask = ((G == 32 ? 0xffffffffu : (1u << G) - 1u)) << (lane & ~(unsigned)(G - 1));
        for (int o = 1; o < G; o <<= 1) {
            amax_t b;
            b.m = __shfl_xor_sync(mask, a.m, o, G);
            b.nan = __shfl_xor_sync(mask, a.nan, o, G);
            a = amax_join(a, b);
        }
        const qctx c = kvw_ctx<F, R>(p, l);
        kvw_block_part<F, BS, P, I>(p, l, c, x, a);
    }
}

/* K (blockIdx.y 0) and V (1) in one launch: a grid-stride loop over each side's shares.
 * The block size (a multiple of 32) and the stride keep a block's G shares in one warp's
 * consecutive lanes, entering and leaving the loop together (shares is a multiple of G). */
template <int F, int R, int BS, int P, typename I>
__global__ void kvw_kernel(kvw_side pk, kvw_side pv, I shares_k, I shares_v)
{
    const I stride = (I)gridDim.x * blockDim.x;
    if (blockIdx.y == 0) {
        for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < shares_k; t += stride)
            kvw_share<F, R, BS, P, I>(pk, t);
    } else {
        for (I t = (I)blockIdx.x * blockDim.x + threadIdx.x; t < shares_v; t += stride)
            kvw_share<F, R, BS, P, I>(pv, t);
    }
}

template <int F, int R, int BS, int P, typename I>
static void kvw_launch(const kvw_side &pk, const kvw_side &pv, size_t sk, size_t sv,
                       unsigned blocks, unsigned threads, cudaStream_t stream)
{
    kvw_kernel<F, R, BS, P, I><<<dim3(blocks, 2), threads, 0, stream>>>(pk, pv, (I)sk, (I)sv);
}

} /* namespace */

/* ---------------------------------------------------------------- host side */

extern "C" const char *lowp_gpu_kv_input_name(lowp_gpu_kv_input in)
{
    return in == LOWP_GPU_IN_BF16 ? "bf16" : in == LOWP_GPU_IN_E4M3 ? "e4m3" : "?";
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Host checks of a slot mapping: every slot < num_pages * page_size, none given twice. */
static int check_slots(const lowp_kv_config *cfg, const int64_t *slots, size_t n, char *why,
                       size_t why_len)
{
    uint64_t cap = (uint64_t)cfg->num_pages * (uint64_t)cfg->page_size; /* checked: no overflow */
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (slots[i] >= 0 && (uint64_t)slots[i] >= cap)
            return lowp_why_set(why, why_len,
                                "slots[%zu] = %lld is not below num_pages * page_size = %llu", i,
                                (long long)slots[i], (unsigned long long)cap);
        used += slots[i] >= 0;
    }
    if (used < 2)
        return 0;
    int64_t *s = (int64_t *)malloc(used * sizeof *s);
    if (s == NULL)
        return lowp_why_set(why, why_len, "out of host memory checking %zu slots for repeats",
                            used);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (slots[i] >= 0)
            s[k++] = slots[i];
    qsort(s, used, sizeof *s, cmp_i64);
    int64_t dup = -1;
    for (size_t i = 1; i < used && dup < 0; i++)
        if (s[i] == s[i - 1])
            dup = s[i];
    free(s);
    if (dup >= 0) {
        size_t first = n, second = n;
        for (size_t i = 0; i < n; i++)
            if (slots[i] == dup) {
                if (first == n)
                    first = i;
                else if (second == n)
                    second = i;
            }
        return lowp_why_set(why, why_len,
                            "slot %lld is given to tokens %zu and %zu: the order of two writes to "
                            "one slot is undefined on the GPU",
                            (long long)dup, first, second);
    }
    return 0;
}

/* Elements a thread (kvw_share), narrow or wide (see KVW_NARROW): block formats 4 or the
 * block size; element-wise formats 4 or 16 where both dims are multiples of it, else
 * the largest of 16, 4, 1 that divides both. cfg is checked. */
static int kvw_p(const lowp_kv_config *cfg, int wide)
{
    const size_t bs = lowp_block_size(cfg->format);
    if (bs > 1)
        return wide ? (int)bs : KVW_NARROW;
    const size_t g = cfg->qk_dim | cfg->vo_dim; /* its low bits: what divides both */
    if (wide && g % 16 == 0)
        return 16;
    return g % 4 == 0 ? 4 : 1;
}

/* LOWP_GPU_KV_WRITE_SHARE=narrow|wide forces a share size (the checks run both: the
 * rule below gives their small cases narrow shares); else -1. Read once. */
static int kvw_forced(void)
{
    static int forced = -2;
    if (forced == -2) {
        const char *e = getenv("LOWP_GPU_KV_WRITE_SHARE");
        forced = e == NULL ? -1 : !strcmp(e, "wide") ? 1 : !strcmp(e, "narrow") ? 0 : -1;
    }
    return forced;
}

/* Wide shares once they give every SM of the current device at least 192 threads for the
 * block formats, 768 for the element-wise ones; below that narrow, to fill the GPU.
 * Measured on an H100 80GB HBM3 with both forced after the format and recipe became
 * template constants (2026-12-06, reports/gpu-kv-write-h100.md; 8 KV heads, 132 SMs):
 * block formats at 124 wide shares an SM narrow was faster (NVFP4 64 x 256 tokens x dim:
 * 4.99 / 5.34 us, MXFP4 64 x 512: 5.34 / 6.75), at 248 wide (NVFP4 512 x 64: 5.86 / 5.54,
 * MXFP8 512 x 128: 7.87 / 7.30; MXFP4 even); element-wise formats at 496 narrow (FP8
 * 512 x 128: 7.01 / 7.30, BF16 6.88 / 6.98), at 992 wide (FP8 512 x 256: 10.21 / 9.79).
 * The earlier kernel's single threshold, 512, was measured on the H200 when a share's
 * fixed work was twice as long. */
static int kvw_wide(const lowp_kv_config *cfg, size_t n_tokens)
{
    const int f = kvw_forced();
    if (f >= 0)
        return f;
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    const size_t P = (size_t)kvw_p(cfg, 1);
    const size_t shares = n_tokens * cfg->num_heads * ((cfg->qk_dim + cfg->vo_dim) / P);
    return shares >= (size_t)sms * (lowp_block_size(cfg->format) > 1 ? 192u : 768u);
}

/* Whether side p's input and code pointers allow kvw_share's word loads and stores: the
 * input at 4 elements (load_part's words), the codes at the bytes one share stores (P
 * codes of 1 or 2 bytes, or P / 2 for 4-bit codes), 8 at most (store_bytes' words); every
 * share's offset from them is a multiple of that (dims are multiples of P, rows of the
 * cache multiples of the share's bytes). */
static void kvw_vec(kvw_side *p, int P)
{
    const size_t esize = p->in_e4m3 ? 1 : 2;
    size_t out = p->bs == 1 ? (size_t)P * (p->format == LOWP_BF16_PASS ? 2 : 1)
                 : p->format == LOWP_MXFP8 ? (size_t)P
                                            : (size_t)P / 2;
    out = out > 8 ? 8 : out;
    p->vec_in = P % 4 == 0 && (uintptr_t)p->x % (4 * esize) == 0;
    p->vec_out = (uintptr_t)p->codes % out == 0;
}

/* Geometry of side w (0 K, 1 V) of cfg, without pointers. cfg is checked. */
static kvw_side side_of(const lowp_kv_config *cfg, int w, lowp_gpu_kv_input in, size_t n_tokens,
                        int P)
{
    kvw_side p;
    memset(&p, 0, sizeof p);
    p.format = (int)cfg->format;
    p.recipe = (int)cfg->recipe;
    p.flags = cfg->quant_flags;
    p.hnd = cfg->layout == LOWP_KV_HND;
    p.interleave = (w == 0 ? cfg->k_sf_order : cfg->v_sf_order) == LOWP_KV_SF_INTERLEAVE4;
    p.in_e4m3 = in == LOWP_GPU_IN_E4M3;
    p.num_pages = cfg->num_pages;
    p.page_size = cfg->page_size;
    p.num_heads = cfg->num_heads;
    p.dim = w == 0 ? cfg->qk_dim : cfg->vo_dim;
    p.rb = lowp_kv_row_code_bytes(cfg, (lowp_kv_which)w);
    p.S = lowp_kv_row_scales(cfg, (lowp_kv_which)w);
    p.bs = lowp_block_size(cfg->format);
    p.n_tokens = n_tokens;
    p.d_parts = kvw_div_make(p.dim / (size_t)P);
    p.d_heads = kvw_div_make(p.num_heads);
    p.d_page = kvw_div_make(p.page_size);
    return p;
}

/* n_tokens * num_heads * dim * elem_bytes fits size_t (so does the share count, which is
 * at most the element count), and n_tokens fits int64. cfg is checked. */
static int check_token_sizes(const lowp_kv_config *cfg, size_t n_tokens, size_t esize, char *why,
                             size_t why_len)
{
    size_t dmax = cfg->qk_dim > cfg->vo_dim ? cfg->qk_dim : cfg->vo_dim;
    if (dmax > SIZE_MAX / cfg->num_heads / esize)
        return lowp_why_set(why, why_len, "num_heads * dim * element bytes overflows size_t");
    size_t row = cfg->num_heads * dmax * esize;
    if (n_tokens > SIZE_MAX / row)
        return lowp_why_set(why, why_len, "n_tokens = %zu makes the input arrays overflow size_t",
                            n_tokens);
    if ((unsigned long long)n_tokens > (unsigned long long)INT64_MAX)
        return lowp_why_set(why, why_len, "n_tokens = %zu does not fit int64", n_tokens);
    return 0;
}

/* 0 if p is device-accessible (device, managed or registered host memory). */
static int check_dev_ptr(const void *p, const char *name, char *why, size_t why_len)
{
    if (p == NULL)
        return lowp_why_set(why, why_len, "%s is NULL", name);
    cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaPointerGetAttributes(&a, p);
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: clear it */
        return lowp_why_set(why, why_len, "%s: cudaPointerGetAttributes failed: %s", name,
                            cudaGetErrorString(e));
    }
    if (a.type == cudaMemoryTypeUnregistered)
        return lowp_why_set(
            why, why_len,
            "%s is ordinary host memory, not a device pointer (copy it to the GPU first)", name);
    return 0;
}

extern "C" int lowp_gpu_kv_write(lowp_gpu_kvcache *c, lowp_gpu_kv_input in, const void *k_dev,
                                 const void *v_dev, const int64_t *slots_dev,
                                 const int64_t *slots_host, size_t n_tokens, cudaStream_t stream,
                                 char *why, size_t why_len)
{
    /* every check first; nothing is launched or changed on a refusal */
    if (lowp_gpu_kvcache_check(c, why, why_len))
        return -1;
    if (in != LOWP_GPU_IN_BF16 && in != LOWP_GPU_IN_E4M3)
        return lowp_why_set(why, why_len,
                            "in = %d is not an input type (LOWP_GPU_IN_BF16 or LOWP_GPU_IN_E4M3)",
                            (int)in);
    if (n_tokens == 0)
        return 0;
    size_t esize = in == LOWP_GPU_IN_BF16 ? 2 : 1;
    if (check_token_sizes(&c->cfg, n_tokens, esize, why, why_len))
        return -1;
    if (check_dev_ptr(k_dev, "k_dev", why, why_len) || check_dev_ptr(v_dev, "v_dev", why, why_len) ||
        check_dev_ptr(slots_dev, "slots_dev", why, why_len))
        return -1;
    if (slots_host != NULL && check_slots(&c->cfg, slots_host, n_tokens, why, why_len))
        return -1;
    const int P = kvw_p(&c->cfg, kvw_wide(&c->cfg, n_tokens));
    kvw_side ps[2];
    size_t shares[2];
    for (int w = 0; w < 2; w++) {
        kvw_side &p = ps[w];
        p = side_of(&c->cfg, w, in, n_tokens, P);
        p.x = w == 0 ? k_dev : v_dev;
        p.slots = slots_dev;
        p.codes = w == 0 ? c->k_codes : c->v_codes;
        p.scales = w == 0 ? c->k_scales : c->v_scales;
        p.gdec = w == 0 ? c->k_global : c->v_global;
        p.n_global = c->n_global;
        kvw_vec(&p, P);
        shares[w] = n_tokens * p.num_heads * (p.dim / (size_t)P); /* <= the input element count */
    }
    /* one launch for K and V (grid y); K and V share the format, so BS, P and I are one */
    const size_t smax = shares[0] > shares[1] ? shares[0] : shares[1];
    const unsigned threads = 256;
    size_t blocks = (smax + threads - 1) / threads;
    if (blocks > ((size_t)1 << 20)) /* grid-stride beyond this */
        blocks = (size_t)1 << 20;
    const bool i32 = kvw_fits32(ps[0], shares[0]) && kvw_fits32(ps[1], shares[1]);
    const unsigned nb = (unsigned)blocks;
    const size_t s0 = shares[0], s1 = shares[1];
    if (kvw_dispatch(ps[0].format, ps[0].recipe, P, [&](auto fm, auto rc, auto bs, auto pp) {
            constexpr int F = decltype(fm)::value, R = decltype(rc)::value;
            constexpr int BS = decltype(bs)::value, PP = decltype(pp)::value;
            i32 ? kvw_launch<F, R, BS, PP, uint32_t>(ps[0], ps[1], s0, s1, nb, threads, stream)
                : kvw_launch<F, R, BS, PP, size_t>(ps[0], ps[1], s0, s1, nb, threads, stream);
        }))
        return lowp_why_set(why, why_len, "no write kernel for format %d, recipe %d",
                            ps[0].format, ps[0].recipe);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return lowp_why_set(why, why_len, "launching the K/V write kernel failed: %s (%s)",
                            cudaGetErrorName(e), cudaGetErrorString(e));
    return 0;
}

extern "C" int lowp_gpu_kv_recipe_check(const lowp_kv_config *cfg, char *why, size_t why_len)
{
    if (cfg == NULL)
        return lowp_why_set(why, why_len, "config is NULL");
    const int r = (int)cfg->recipe;
    int ok;
    switch (cfg->format) {
    case LOWP_NVFP4:
        ok = r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT ||
             r == LOWP_RECIPE_SGLANG_KV;
        break;
    case LOWP_MXFP4:
    case LOWP_MXFP8: ok = r == LOWP_RECIPE_OCP || r == LOWP_RECIPE_RCEIL || r == LOWP_RECIPE_TRTLLM; break;
    default: ok = 1; /* elementwise formats: the recipe does not act */
    }
    if (!ok)
        return lowp_why_set(why, why_len,
                            "the GPU quantize-on-write kernel does not implement recipe %s for %s "
                            "(NVFP4: trtllm, exact, modelopt, sglang-kv; MX: ocp, rceil, trtllm)",
                            lowp_recipe_name(cfg->recipe), lowp_block_format_name(cfg->format));
    return 0;
}

extern "C" int lowp_gpu_kv_write_emulate(lowp_kvcache *host, lowp_gpu_kv_input in, const void *k,
                                         const void *v, const int64_t *slots, size_t n_tokens,
                                         char *why, size_t why_len)
{
    if (host == NULL)
        return lowp_why_set(why, why_len, "host cache is NULL");
    const lowp_kv_config *cfg = lowp_kvcache_config(host);
    if (lowp_kv_config_check(cfg, why, why_len) || lowp_gpu_kv_recipe_check(cfg, why, why_len))
        return -1;
    if (in != LOWP_GPU_IN_BF16 && in != LOWP_GPU_IN_E4M3)
        return lowp_why_set(why, why_len, "in = %d is not an input type", (int)in);
    if (n_tokens == 0)
        return 0;
    if (k == NULL || v == NULL || slots == NULL)
        return lowp_why_set(why, why_len, "%s is NULL",
                            k == NULL   ? "k"
                            : v == NULL ? "v"
                                        : "slots");
    if (check_token_sizes(cfg, n_tokens, in == LOWP_GPU_IN_BF16 ? 2 : 1, why, why_len) ||
        check_slots(cfg, slots, n_tokens, why, why_len))
        return -1;
    size_t H = cfg->num_heads;
    float *gs = (float *)malloc(2 * H * sizeof *gs);
    if (gs == NULL)
        return lowp_why_set(why, why_len, "out of host memory");
    for (int w = 0; w < 2; w++)
        for (size_t h = 0; h < H; h++)
            gs[(size_t)w * H + h] = lowp_kvcache_global_scale(host, (lowp_kv_which)w, h);
    for (int w = 0; w < 2; w++) {
        const int P = kvw_p(cfg, kvw_forced() == 1);
        kvw_side p = side_of(cfg, w, in, n_tokens, P);
        p.x = w == 0 ? k : v;
        p.slots = slots;
        p.codes = lowp_kvcache_buffer(host, (lowp_kv_which)w, LOWP_KV_CODES, NULL);
        p.scales = lowp_kvcache_buffer(host, (lowp_kv_which)w, LOWP_KV_SCALES, NULL);
        p.gdec = gs + (size_t)w * H;
        p.n_global = H;
        kvw_vec(&p, P);
        const size_t shares = n_tokens * p.num_heads * (p.dim / (size_t)P);
        if (kvw_fits32(p, shares) ? kvw_host_side<uint32_t>(p, shares, P)
                                  : kvw_host_side<size_t>(p, shares, P)) {
            free(gs);
            return lowp_why_set(why, why_len, "no write kernel for format %d, recipe %d",
                                p.format, p.recipe);
        }
    }
    free(gs);
    return 0;
}
