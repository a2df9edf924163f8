/* gpu/kernels/kv_write.cu: quantize-on-write into a paged GPU KV cache (lowp/gpu_kvcache.h).
 *
 * One thread writes one unit: one quantization block (NVFP4 16, MX 32 elements) of one
 * (token, head) row of K or V, or one element for the element-wise formats (FP8, BF16);
 * K and V are one launch (grid y), the block size a template constant (kvw_unit).
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
 *     codecs init_ctx chooses; so no PTX cvt (E2M1/UE8M0 cvt does not exist on sm_90) and
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

#include <cuda_runtime.h>

#include "lowp/codec_core.h"
#include "lowp/gpu_kvcache.h"
#include "lowp/why.h"

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

/* One block of BS elements (BS = 16 NVFP4, 32 MX): block_amax + block_scales +
 * quantize_chunk. ec gets BS element codes, *scale the block scale code. */
template <int BS>
HD void quant_block(const qctx *c, const float *x, uint8_t *ec, uint8_t *scale)
{
    const int r = c->recipe;
    /* block_amax: NaN ignored (fmaxf) or propagated (torch.amax) */
    int propagate = r == LOWP_RECIPE_MODELOPT || r == LOWP_RECIPE_OCP || r == LOWP_RECIPE_RCEIL;
    float m = 0.0f;
    int nan = 0;
    for (int i = 0; i < BS; i++) {
        float a = fabsf(x[i]);
        nan |= a != a;
        m = a > m ? a : m; /* a NaN compares false: ignored */
    }
    const float amax = (propagate && nan) ? qnan() : m;
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
    /* quantize_chunk: scale, then the element codec */
    for (int i = 0; i < BS; i++) {
        float v = c->divide ? x[i] / factor : x[i] * factor;
        uint32_t code = encode_signed(c->elem, lowp_f32_bits(v));
        if (r == LOWP_RECIPE_MODELOPT) /* _cast_fp4: sign bit = (scaled < 0): -0, NaN -> + */
            code = (code & 7u) | ((uint32_t)(v < 0.0f) << 3);
        ec[i] = (uint8_t)code;
    }
    *scale = (uint8_t)q;
}

/* ---------------------------------------------------------------- placement */

/* Everything one launch (K or V) needs; plain data, passed by value. */
struct kvw_side {
    int format, recipe;
    unsigned flags;
    int hnd;        /* layout HND */
    int interleave; /* scale order INTERLEAVE4 */
    int in_e4m3;    /* input type: E4M3 codes (else BF16 bits) */
    size_t num_pages, page_size, num_heads;
    size_t dim, rb, S, bs, nblk; /* row elements, code bytes, scales; block size, units per row */
    size_t n_tokens;
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

/* Row index of (page, slot, head) in a [..][row] buffer: lowp_kvcache_code_offset. */
HD size_t row_index(const kvw_side &p, size_t page, size_t slot, size_t head)
{
    return p.hnd ? (page * p.num_heads + head) * p.page_size + slot
                 : (page * p.page_size + slot) * p.num_heads + head;
}

/* Unit u = ((token * num_heads) + head) * nblk + block. Mirrors lowp_kvcache_write: the
 * row of (token, head) quantized with that head's global scale, codes at
 * lowp_kvcache_code_offset + the block's code bytes, scale s at lowp_kvcache_scale_offset.
 * BS is p.bs (1, 16 or 32) as a constant, so that x and ec live in registers (with a
 * runtime block size they were a 160-byte stack frame in local memory); I is the index
 * type: uint32_t when the units and the slots (num_pages * page_size) fit it (kvw_fits32),
 * else size_t (64-bit divisions are a long instruction sequence each on the GPU). The
 * arithmetic is the same whatever BS and I. */
template <int BS, typename I> HD void kvw_unit(const kvw_side &p, I u)
{
    const I blk = u % (I)p.nblk;
    const I row = u / (I)p.nblk;
    const I head = row % (I)p.num_heads;
    const I tok = row / (I)p.num_heads;
    int64_t slot = p.slots[tok];
    if (slot < 0) /* padding: skipped */
        return;
    if ((uint64_t)slot >= (uint64_t)(p.num_pages * p.page_size)) /* never out of bounds */
        return;
    const I page = (I)slot / (I)p.page_size, sip = (I)slot % (I)p.page_size;
    size_t in0 = (size_t)row * p.dim + (size_t)blk * BS;
    float g = p.gdec[p.n_global == 1 ? 0 : head];
    qctx c;
    qctx_init(&c, p.format, p.recipe, p.flags, g);
    uint8_t *dst = p.codes + row_index(p, page, sip, head) * p.rb;
    if constexpr (BS == 1) {
        /* FP8: x / g (true division); BF16: x as is (quantize_chunk, bs == 1) */
        float x = load_input(p, in0);
        float v = c.divide ? x / c.dec : x;
        uint32_t code = encode_signed(c.elem, lowp_f32_bits(v));
        if (p.format == LOWP_BF16_PASS) { /* two bytes, little-endian */
            dst[2 * (size_t)blk] = (uint8_t)(code & 0xffu);
            dst[2 * (size_t)blk + 1] = (uint8_t)(code >> 8);
        } else {
            dst[blk] = (uint8_t)code;
        }
    } else {
        float x[BS];
        uint8_t ec[BS];
        uint8_t q;
        for (int i = 0; i < BS; i++)
            x[i] = load_input(p, in0 + i);
        quant_block<BS>(&c, x, ec, &q);
        if (p.format == LOWP_MXFP8) {
            for (int i = 0; i < BS; i++)
                dst[(size_t)blk * BS + i] = ec[i];
        } else { /* 4-bit codes, element 2j in the low nibble */
            for (int j = 0; j < BS / 2; j++)
                dst[(size_t)blk * (BS / 2) + j] = (uint8_t)(ec[2 * j] | (ec[2 * j + 1] << 4));
        }
        /* lowp_kvcache_scale_offset: (t, s) -> interleaved (t', s') within the page's tile */
        I t = sip, s = blk;
        if (p.interleave) {
            const I qq = (I)(p.S / 4);
            t = (sip / 4) * 4 + blk / qq;
            s = (blk % qq) * 4 + sip % 4;
        }
        p.scales[row_index(p, page, t, head) * p.S + s] = q;
    }
}

/* Whether side p's unit indices and slots fit uint32_t (kvw_unit's I): units below 2^31,
 * so that u + the grid stride (at most 2^28) cannot wrap. */
static inline bool kvw_fits32(const kvw_side &p, size_t units)
{
    return units <= INT32_MAX && p.num_pages * p.page_size <= UINT32_MAX;
}

/* Every unit of side p (the host emulation): kvw_unit with the kernel's BS and I. */
template <typename I> static void kvw_host_side(const kvw_side &p, size_t units)
{
    for (size_t u = 0; u < units; u++) {
        if (p.bs == 1)
            kvw_unit<1, I>(p, (I)u);
        else if (p.bs == 16)
            kvw_unit<16, I>(p, (I)u);
        else
            kvw_unit<32, I>(p, (I)u);
    }
}

/* K (blockIdx.y 0) and V (1) in one launch: a grid-stride loop over each side's units. */
template <int BS, typename I>
__global__ void kvw_kernel(kvw_side pk, kvw_side pv, I units_k, I units_v)
{
    const I stride = (I)gridDim.x * blockDim.x;
    if (blockIdx.y == 0) {
        for (I u = (I)blockIdx.x * blockDim.x + threadIdx.x; u < units_k; u += stride)
            kvw_unit<BS, I>(pk, u);
    } else {
        for (I u = (I)blockIdx.x * blockDim.x + threadIdx.x; u < units_v; u += stride)
            kvw_unit<BS, I>(pv, u);
    }
}

template <int BS, typename I>
static void kvw_launch(const kvw_side &pk, const kvw_side &pv, size_t uk, size_t uv,
                       unsigned blocks, unsigned threads, cudaStream_t stream)
{
    kvw_kernel<BS, I><<<dim3(blocks, 2), threads, 0, stream>>>(pk, pv, (I)uk, (I)uv);
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

/* Geometry of side w (0 K, 1 V) of cfg, without pointers. cfg is checked. */
static kvw_side side_of(const lowp_kv_config *cfg, int w, lowp_gpu_kv_input in, size_t n_tokens)
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
    p.nblk = p.dim / p.bs;
    p.n_tokens = n_tokens;
    return p;
}

/* n_tokens * num_heads * dim * elem_bytes fits size_t (so does the unit count, which is
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
    kvw_side ps[2];
    size_t units[2];
    for (int w = 0; w < 2; w++) {
        kvw_side &p = ps[w];
        p = side_of(&c->cfg, w, in, n_tokens);
        p.x = w == 0 ? k_dev : v_dev;
        p.slots = slots_dev;
        p.codes = w == 0 ? c->k_codes : c->v_codes;
        p.scales = w == 0 ? c->k_scales : c->v_scales;
        p.gdec = w == 0 ? c->k_global : c->v_global;
        p.n_global = c->n_global;
        units[w] = n_tokens * p.num_heads * p.nblk; /* <= the input element count */
    }
    /* one launch for K and V (grid y); K and V share the format, so BS and I are one */
    const size_t umax = units[0] > units[1] ? units[0] : units[1];
    const unsigned threads = 256;
    size_t blocks = (umax + threads - 1) / threads;
    if (blocks > ((size_t)1 << 20)) /* grid-stride beyond this */
        blocks = (size_t)1 << 20;
    const bool i32 = kvw_fits32(ps[0], units[0]) && kvw_fits32(ps[1], units[1]);
    const unsigned nb = (unsigned)blocks;
    switch (ps[0].bs) {
    case 1:
        i32 ? kvw_launch<1, uint32_t>(ps[0], ps[1], units[0], units[1], nb, threads, stream)
            : kvw_launch<1, size_t>(ps[0], ps[1], units[0], units[1], nb, threads, stream);
        break;
    case 16:
        i32 ? kvw_launch<16, uint32_t>(ps[0], ps[1], units[0], units[1], nb, threads, stream)
            : kvw_launch<16, size_t>(ps[0], ps[1], units[0], units[1], nb, threads, stream);
        break;
    default:
        i32 ? kvw_launch<32, uint32_t>(ps[0], ps[1], units[0], units[1], nb, threads, stream)
            : kvw_launch<32, size_t>(ps[0], ps[1], units[0], units[1], nb, threads, stream);
        break;
    }
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
        kvw_side p = side_of(cfg, w, in, n_tokens);
        p.x = w == 0 ? k : v;
        p.slots = slots;
        p.codes = lowp_kvcache_buffer(host, (lowp_kv_which)w, LOWP_KV_CODES, NULL);
        p.scales = lowp_kvcache_buffer(host, (lowp_kv_which)w, LOWP_KV_SCALES, NULL);
        p.gdec = gs + (size_t)w * H;
        p.n_global = H;
        size_t units = n_tokens * p.num_heads * p.nblk;
        if (kvw_fits32(p, units))
            kvw_host_side<uint32_t>(p, units);
        else
            kvw_host_side<size_t>(p, units);
    }
    free(gs);
    return 0;
}
