/* ref/block/src/block_fast.c: fused single-pass NVFP4 and MXFP4 quantization of binary32
 * (x86-64: an AVX-512 F/BW/DQ/VL kernel and an AVX2 kernel, the best the CPU runs chosen at
 * run time, so one binary runs everywhere; other CPUs use block.c's generic path). The
 * AVX-512 kernel is described here; the AVX2 one, below, does the same in 8-lane vectors.
 *
 * block.c quantizes a chunk in several passes over memory (amax, scales, factors,
 * multiply, encode, pack). Here a group of 16 blocks goes through every step in registers
 * and is stored once:
 *   1. |x| of each block, reduced to the 16 block amaxes in one vector (a transposing max
 *      tree: no horizontal reduction per block);
 *   2. the recipe's scale arithmetic on that vector, in the same binary32 operations and
 *      order as block.c's block_scales; the scale code by an exact rounding (E4M3, below)
 *      or from the bits (E8M0); the element factor read from block.c's factor_of_code
 *      table (a gather), so it is the same binary32 value by construction;
 *   3. per block: x * factor (or x / divisor), the E2M1 code by an exact rounding, the
 *      sign, two codes per byte, 8-byte stores.
 *
 * Exact rounding by one addition. For a >= 0 and a power of two M = q * 2^23 with
 * a < 2M, the binary32 sum a + M lies in [M, 2M), where the spacing is exactly q, so the
 * sum rounded once (to nearest even, or up) is M + a rounded to a multiple of q in that
 * same mode: ties go to the even multiple because M / q = 2^23 is even. The number of
 * quanta k is then read from the low bits of the sum. Choosing q as the target format's
 * quantum at a (2^(e - mbits) in the normal range, the subnormal quantum below it) makes
 * this exactly the format's rounding, and the code is k plus 2^mbits per binade above the
 * lowest. E4M3: mbits 3, subnormal quantum 2^-9 (M >= 2^14). E2M1: mbits 1, quantum 0.5
 * below 2 (M >= 2^22). The additions use an explicit rounding mode, so MXCSR does not
 * matter for them; the multiplies and divides use MXCSR exactly as block.c's C code does.
 *
 * What is not handled here goes back to block.c (the caller's fallback), a group (16
 * blocks, 8 for AVX2) at a time, so codes, scales and counts stay those of the generic path:
 *   - a NaN or Inf input (amax rules, NaN codes and scales, the nan_in/inf_in counts);
 *   - a non-finite element factor (NVFP4 trtllm/sglang rcp~ of a zero scale is Inf, and
 *     then 0 * Inf is NaN), or a zero divisor;
 *   - a modelopt scale s > 448 (torch's cast gives NaN there, or NaN above 464);
 *   - calls whose constants are outside the domain (lowp_block_fast_init).
 * Within that domain every block scale is finite, so no element decodes to NaN and the
 * counts reduce to mask popcounts (see count_vec). */
#include <string.h>

#include "block_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define LOWP_FAST_X86 1
#include <immintrin.h>
#endif

int lowp_block_fast_isa_supported(void)
{
#ifdef LOWP_FAST_X86
    /* Every thread computes the same value, so a relaxed atomic cache is enough.
     * __builtin_cpu_supports also checks that the OS saves the vector registers (XGETBV). */
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
            v = LOWP_BLOCK_ISA_AVX512;
        else if (__builtin_cpu_supports("avx2"))
            v = LOWP_BLOCK_ISA_AVX2;
        else
            v = LOWP_BLOCK_ISA_SCALAR;
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v;
#else
    return LOWP_BLOCK_ISA_SCALAR;
#endif
}

/* The limit of lowp_block_fast_limit_isa; read once per call by lowp_block_fast_init. */
static int isa_limit = LOWP_BLOCK_ISA_AVX512;

int lowp_block_fast_limit_isa(int max_isa)
{
    if (max_isa < LOWP_BLOCK_ISA_SCALAR)
        max_isa = LOWP_BLOCK_ISA_SCALAR;
    if (max_isa > LOWP_BLOCK_ISA_AVX512)
        max_isa = LOWP_BLOCK_ISA_AVX512;
    return __atomic_exchange_n(&isa_limit, max_isa, __ATOMIC_RELAXED);
}

int lowp_block_fast_isa(void)
{
    int s = lowp_block_fast_isa_supported(), l = __atomic_load_n(&isa_limit, __ATOMIC_RELAXED);
    return s < l ? s : l;
}

int lowp_block_fast_cpu(void) { return lowp_block_fast_isa() != LOWP_BLOCK_ISA_SCALAR; }

const char *lowp_block_fast_isa_name(int isa)
{
    switch (isa) {
    case LOWP_BLOCK_ISA_SCALAR: return "scalar";
    case LOWP_BLOCK_ISA_AVX2: return "avx2";
    case LOWP_BLOCK_ISA_AVX512: return "avx512";
    default: return "?";
    }
}

static int finite_positive(float v) { return v > 0.0f && v <= 0x1.fffffep127f; }

int lowp_block_fast_init(lowp_block_fast *p)
{
    p->isa = lowp_block_fast_isa();
    if (p->isa == LOWP_BLOCK_ISA_SCALAR || p->factor_of_code == NULL)
        return 0;
    p->mul_a = p->mul_b = 1.0f;
    p->divide = p->sign_lt0 = 0;
    p->zero_factor = 1;
    if (p->format == LOWP_MXFP4) {
        /* No global scale: the counts decode with 1.0. The scale arithmetic of
         * block_scales: ocp reads the exponent bits; rceil m * (1/6); trtllm m * rcp~(6). */
        p->scale_up = 0;
        switch (p->recipe) {
        case LOWP_RECIPE_OCP: p->zero_factor = 0; return 1;
        case LOWP_RECIPE_RCEIL:
            p->mul_a = 1.0f / 6.0f;
            p->divide = 1;
            p->zero_factor = 0;
            return 1;
        case LOWP_RECIPE_TRTLLM: p->mul_a = p->rcp6; return finite_positive(p->mul_a);
        default: return 0;
        }
    }
    if (p->format != LOWP_NVFP4)
        return 0;
    /* The counts read the decode-side scale (element x block scale x dec); with dec finite
     * and normal, a decoded value is 0 exactly when the element or block scale code is a
     * zero, and never NaN for a finite scale (count_vec relies on that). Normal, not just
     * nonzero: with MXCSR.DAZ set, block.c's count would read a subnormal dec as 0. */
    float ad = p->dec < 0.0f ? -p->dec : p->dec;
    if (!(ad >= 0x1p-126f && ad <= 0x1.fffffep127f))
        return 0;
    /* The scale arithmetic, as block_scales writes it, with its constants: the kernel
     * needs them finite and positive, so sf is never NaN nor negative. */
    switch (p->recipe) {
    case LOWP_RECIPE_TRTLLM: /* sf = S * (m * rcp~(6)) */
        p->mul_a = p->rcp6;
        p->mul_b = p->enc;
        p->scale_up = 0;
        break;
    case LOWP_RECIPE_SGLANG_KV: /* sf = rcp~(g) * (m * rcp~(6)) */
        p->mul_a = p->rcp6;
        p->mul_b = p->rcp_dec;
        p->scale_up = 0;
        break;
    case LOWP_RECIPE_EXACT: /* sf = m * (S * (1/6)) */
        p->mul_a = p->enc * (1.0f / 6.0f);
        break;
    case LOWP_RECIPE_MODELOPT: /* s = m / (6 * g); v = x / (val(q) * g); sign v < 0 */
        p->mul_a = 6.0f * p->dec;
        p->divide = 1;
        p->sign_lt0 = 1;
        p->zero_factor = 0;
        break;
    default:
        return 0;
    }
    return finite_positive(p->mul_a) && finite_positive(p->mul_b);
}

#ifdef LOWP_FAST_X86

#define FAST_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define FAST_INLINE static inline __attribute__((always_inline)) FAST_TARGET

/* Software prefetch distance in floats (8 KiB). One core's demand misses plus the hardware
 * prefetcher leave DRAM bandwidth unused at this rate (measured on the 2-core EPYC, 2^24
 * values: about 4.5 G elements/s without, 5.8 with); a prefetch per 64-byte line keeps
 * more lines in flight. A prefetch past the end of x is harmless: it never faults. */
#define LOWP_FAST_PREFETCH 2048
#define EXP_MASK 0x7f800000
#define B14 ((127 + 14) << 23) /* bits of 2^14: M for the E4M3 subnormal quantum 2^-9 */
#define B22 ((127 + 22) << 23) /* bits of 2^22: M for the E2M1 quantum 0.5 */

/* E4M3 code of v >= 0 (never NaN) under RN satfinite (cuda) or RU satfinite (ocp, sat on),
 * the two scale conversions of the NVFP4 recipes in the kernel's domain (modelopt's torch
 * cast only differs above 448, which falls back). Clamping first: every v >= 464 rounds to
 * 448 under RN satfinite (464 is the tie between 448 = 1.110b x 2^8 and 480, even is 448),
 * and every v > 448 gives 448 under RU satfinite. M = 2^(e + 20) for v = 1.f x 2^e, at
 * least 2^14; the code is k + 8 (e + 6) = k + ((bits(M) - B14) >> 20), i.e. from
 * y = bits(v + M) - B14 = k + ((e + 6) << 23): code = y + (y >> 20), low 8 bits. */
FAST_INLINE __m512i e4m3_code(__m512 v, const int up)
{
    v = _mm512_min_ps(v, _mm512_set1_ps(up ? 448.0f : 464.0f));
    __m512i t = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(EXP_MASK));
    __m512i bm = _mm512_max_epi32(_mm512_add_epi32(t, _mm512_set1_epi32(20 << 23)),
                                  _mm512_set1_epi32(B14));
    __m512 s = up ? _mm512_add_round_ps(v, _mm512_castsi512_ps(bm), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
                  : _mm512_add_round_ps(v, _mm512_castsi512_ps(bm), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i y = _mm512_sub_epi32(_mm512_castps_si512(s), _mm512_set1_epi32(B14));
    __m512i q = _mm512_and_si512(_mm512_add_epi32(y, _mm512_srli_epi32(y, 20)), _mm512_set1_epi32(0xff));
    if (up) /* a binary32 subnormal v rounds up to 2^-9 (code 1) also if MXCSR.DAZ is set,
             * as the integer codec does; v + M would read it as 0 then */
        q = _mm512_mask_mov_epi32(q, _mm512_cmp_epu32_mask(_mm512_sub_epi32(_mm512_castps_si512(v), _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fffff), _MM_CMPINT_LT), _mm512_set1_epi32(1));
    return q;
}

/* E8M0 code of v >= 0 under (e8m0, cuda, ru, sat), as lowp_encode_bits_e8m0 does it: the
 * biased exponent, plus one when the value is not a power of two (for a binary32
 * subnormal, when it is above 2^-127); 0 gives 0x00. Its saturation above 2^127 (to 0xFE)
 * cannot happen here: v is a finite amax times RN(1/6) or rcp~(6), below 2^126. */
FAST_INLINE __m512i e8m0_up_code(__m512 v)
{
    __m512i b = _mm512_castps_si512(v);
    __m512i e = _mm512_srli_epi32(b, 23);
    __mmask16 normal = _mm512_test_epi32_mask(b, _mm512_set1_epi32(EXP_MASK));
    __mmask16 frac = _mm512_test_epi32_mask(b, _mm512_set1_epi32(0x7fffff));
    __mmask16 above = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffff)),
                                              _mm512_set1_epi32(0x400000));
    __mmask16 up = (__mmask16)((normal & frac) | (~normal & above));
    return _mm512_mask_add_epi32(e, up, e, _mm512_set1_epi32(1));
}

/* E2M1 magnitude code of min(|v|, 6) rounded to nearest even (cvt.rn.satfinite: anything
 * beyond 6, Inf included, is 6), in the low 3 bits of each lane (higher bits are junk).
 * M = 2^(e + 22) for a = 1.f x 2^e, at least 2^22; the code is k + 2 (e + 1) (0 below 1).
 * To read it with one shift and one add, M is raised by 6 quanta (even, so ties still go
 * to the even k, and the sum stays in M's binade): bits(a + M') = bits(M) + 6 + k and
 * bits >> 22 = 298 + 2 (e + 1), so bits + (bits >> 22) = k + 2 (e + 1) + 304 (mod 8),
 * 304 = 38 x 8. */
FAST_INLINE __m512i e2m1_mag(__m512 v)
{
    /* vrangeps imm 0b1010: the operand of smaller magnitude, sign cleared: min(|v|, 6) */
    __m512 a = _mm512_range_ps(v, _mm512_set1_ps(6.0f), 0x0a);
    __m512i t = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(EXP_MASK));
    __m512i bm = _mm512_max_epi32(_mm512_add_epi32(t, _mm512_set1_epi32((22 << 23) + 6)),
                                  _mm512_set1_epi32(B22 + 6));
    __m512i s = _mm512_castps_si512(
        _mm512_add_round_ps(a, _mm512_castsi512_ps(bm), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm512_add_epi32(s, _mm512_srli_epi32(s, 22));
}

/* The 4-bit E2M1 code of v, clean in each lane: the magnitude and the sign bit, which is
 * v's sign bit (cvt.rn.satfinite.e2m1x2 keeps it, -0 included) or, for modelopt's
 * _cast_fp4, (v < 0) (so -0 is +0). */
FAST_INLINE __m512i e2m1_code(__m512 v, const int sign_lt0)
{
    const __m512i seven = _mm512_set1_epi32(7);
    if (sign_lt0) {
        __m512i c = _mm512_and_si512(e2m1_mag(v), seven);
        return _mm512_mask_or_epi32(c, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), c,
                                    _mm512_set1_epi32(8));
    }
    __m512i sgn = _mm512_srli_epi32(_mm512_castps_si512(v), 28);
    /* (mag & 7) | (sgn & 8): the bits of mag where the selector is 7, else those of sgn */
    return _mm512_ternarylogic_epi32(seven, e2m1_mag(v), sgn, 0xca);
}

/* 16 four-bit codes (one per dword, clean) to 8 bytes, element 2i in the low nibble:
 * per qword, lo | hi << 32 becomes lo | hi << 4 in its low byte; vpmovqb keeps that byte. */
FAST_INLINE void store_packed(uint8_t *dst, __m512i c)
{
    __m512i pk = _mm512_or_si512(c, _mm512_srli_epi64(c, 28));
    _mm_storel_epi64((__m128i *)(void *)dst, _mm512_cvtepi64_epi8(pk));
}

/* Counts of 16 elements done here (recipes.md "Counting", as block.c's count_chunk computes
 * them). In the kernel's domain the input is finite (nan_in, inf_in: 0), the block scale
 * is finite (nan_out: 0) and the global scale finite and nonzero, so the decoded value is
 * 0 exactly when the element magnitude code is 0 or the scale is 0 (NVFP4 only; E8M0 has
 * no zero): flushed counts the nonzero inputs among those. saturated: |v| > 6, which
 * implies a nonzero input and code +-6. */
FAST_INLINE void count_vec(lowp_quant_counts *k, __m512 x, __m512 v, __m512i code, int scale_zero)
{
    __mmask16 nz = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    __mmask16 magnz = _mm512_test_epi32_mask(code, _mm512_set1_epi32(7));
    __mmask16 fl = scale_zero ? nz : (__mmask16)(nz & ~magnz);
    __mmask16 sat = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(6.0f), _CMP_GT_OQ);
    k->flushed += (size_t)__builtin_popcount(fl);
    k->saturated += (size_t)__builtin_popcount(sat);
}

/* Elements of one block (nv vectors of 16) with its factor (or divisor) fv. */
FAST_INLINE void block_elements(const float *restrict x, uint8_t *restrict codes, __m512 fv,
                                const int nv, const int divide, const int sign_lt0,
                                lowp_quant_counts *k, const int counting, int scale_zero)
{
    for (int h = 0; h < nv; h++) {
        __m512 xv = _mm512_loadu_ps(x + 16 * h);
        __m512 v = divide ? _mm512_div_ps(xv, fv) : _mm512_mul_ps(xv, fv);
        __m512i c = e2m1_code(v, sign_lt0);
        store_packed(codes + 8 * h, c);
        if (counting)
            count_vec(k, xv, v, c, scale_zero);
    }
}

/* One group of nbg <= 16 blocks of 16 * nv elements (nv = 1: NVFP4, 2: MXFP4). Returns 1
 * when done, 0 when the group is left to the generic path: every check comes before the
 * first store, so then nothing has been written and counts are untouched. */
FAST_INLINE int fused_group(const lowp_block_fast *p, const float *restrict x, const size_t nbg,
                            uint8_t *restrict codes, uint8_t *restrict scales,
                            lowp_quant_counts *k, const int nv, const int counting)
{
    const size_t bs = 16 * (size_t)nv;
    const __mmask16 valid = (__mmask16)(nbg >= 16 ? 0xffffu : (1u << nbg) - 1u);
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    const __m512 zero = _mm512_setzero_ps();
    /* 1. Block amax as integers: for finite values, the order of |x| is the order of its
     * bits; NaN and Inf are larger than any finite bits and are caught below. */
    __m512i a[16];
    for (size_t b = 0; b < 16; b++) {
        a[b] = _mm512_setzero_si512();
        if (b < nbg)
            for (int h = 0; h < nv; h++)
                a[b] = _mm512_max_epu32(a[b], _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + bs * b + 16 * h)), absmask));
    }
    /* A transposing max tree of non-destructive shuffles: levels 1-2 (vshufps) turn the
     * vectors of blocks 4i..4i+3 into one whose 128-bit lane l holds, for each of those
     * blocks, the max over lanes 4l..4l+3; levels 3-4 (vshufi32x4) max the 128-bit lanes
     * pairwise, so lane b of a[0] is block b's amax, blocks in order. */
    for (size_t i = 0; i < 8; i++) { /* per 128-bit lane: [b 01, b 23, b+1 01, b+1 23] */
        __m512 p0 = _mm512_castsi512_ps(a[2 * i]), p1 = _mm512_castsi512_ps(a[2 * i + 1]);
        a[i] = _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(p0, p1, 0x88)),
                                _mm512_castps_si512(_mm512_shuffle_ps(p0, p1, 0xdd)));
    }
    for (size_t i = 0; i < 4; i++) { /* per 128-bit lane: [b, b+1, b+2, b+3] */
        __m512 p0 = _mm512_castsi512_ps(a[2 * i]), p1 = _mm512_castsi512_ps(a[2 * i + 1]);
        a[i] = _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(p0, p1, 0x88)),
                                _mm512_castps_si512(_mm512_shuffle_ps(p0, p1, 0xdd)));
    }
    for (size_t i = 0; i < 2; i++) /* 128-bit lanes: [4i.. half 0, half 1, 4i+4.. half 0, 1] */
        a[i] = _mm512_max_epu32(_mm512_shuffle_i32x4(a[2 * i], a[2 * i + 1], 0x88),
                                _mm512_shuffle_i32x4(a[2 * i], a[2 * i + 1], 0xdd));
    a[0] = _mm512_max_epu32(_mm512_shuffle_i32x4(a[0], a[1], 0x88),
                            _mm512_shuffle_i32x4(a[0], a[1], 0xdd));
    if (_mm512_mask_cmpge_epu32_mask(valid, a[0], _mm512_set1_epi32(EXP_MASK)))
        return 0; /* NaN or Inf input */
    const __m512 m = _mm512_castsi512_ps(a[0]);

    /* 2. Scale code: block_scales' arithmetic, the same operations in the same order. */
    __m512i q;
    if (nv == 2) {
        if (p->recipe == LOWP_RECIPE_OCP) /* biased exponent - emax (2), at least 0 */
            q = _mm512_max_epi32(_mm512_sub_epi32(_mm512_srli_epi32(a[0], 23), _mm512_set1_epi32(2)),
                                 _mm512_setzero_si512());
        else /* rceil m * (1/6), trtllm m * rcp~(6), rounded up to E8M0 */
            q = e8m0_up_code(_mm512_mul_ps(m, _mm512_set1_ps(p->mul_a)));
    } else {
        __m512 sf;
        switch (p->recipe) {
        case LOWP_RECIPE_TRTLLM:    /* S * (m * rcp~(6)) */
        case LOWP_RECIPE_SGLANG_KV: /* rcp~(g) * (m * rcp~(6)) */
            sf = _mm512_mul_ps(_mm512_set1_ps(p->mul_b), _mm512_mul_ps(m, _mm512_set1_ps(p->mul_a)));
            break;
        case LOWP_RECIPE_EXACT: /* m != 0 ? m * (S * (1/6)) : 0; m * k is +0 for m = 0 */
            sf = _mm512_mul_ps(m, _mm512_set1_ps(p->mul_a));
            break;
        default: { /* modelopt: s = m / (6 g); 0 -> 1; max(s, 2^-9) */
            __m512 s = _mm512_div_ps(m, _mm512_set1_ps(p->mul_a));
            s = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(s, zero, _CMP_EQ_OQ), s, _mm512_set1_ps(1.0f));
            sf = _mm512_max_ps(s, _mm512_set1_ps(0x1p-9f));
            if (_mm512_mask_cmp_ps_mask(valid, sf, _mm512_set1_ps(448.0f), _CMP_GT_OQ))
                return 0; /* torch's cast: NaN above 464 */
            break;
        }
        }
        q = e4m3_code(sf, p->scale_up);
    }
    /* The element factor of block.c: factor_of_code[q], and 0 for an all-zero block in the
     * recipes whose rule says so. */
    __m512 f = p->zero_factor
                   ? _mm512_mask_i32gather_ps(zero, _mm512_cmp_ps_mask(m, zero, _CMP_NEQ_OQ), q,
                                              p->factor_of_code, 4)
                   : _mm512_i32gather_ps(q, p->factor_of_code, 4);
    __mmask16 bad = _mm512_mask_cmpeq_epi32_mask(
        valid, _mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(EXP_MASK)),
        _mm512_set1_epi32(EXP_MASK));
    if (p->divide)
        bad |= _mm512_mask_cmp_ps_mask(valid, f, zero, _CMP_EQ_OQ);
    if (bad)
        return 0; /* Inf factor (x * Inf and 0 * Inf), or x / 0 */
    _mm_mask_storeu_epi8(scales, valid, _mm512_cvtepi32_epi8(q));
    float fb[16] __attribute__((aligned(64)));
    int qz[16] __attribute__((aligned(64)));
    _mm512_store_ps(fb, f);
    if (counting) {
        k->elements += bs * nbg;
        k->blocks += nbg;
        if (nv == 1) { /* E4M3 scale 0 and subnormal (codes 1..7); E8M0 has neither */
            __mmask16 z = _mm512_mask_cmpeq_epi32_mask(valid, q, _mm512_setzero_si512());
            __mmask16 sub = _mm512_mask_cmplt_epu32_mask(
                valid, _mm512_sub_epi32(q, _mm512_set1_epi32(1)), _mm512_set1_epi32(7));
            k->scale_zero += (size_t)__builtin_popcount(z);
            k->scale_subnormal += (size_t)__builtin_popcount(sub);
            _mm512_store_si512(qz, q);
        } else {
            _mm512_store_si512(qz, _mm512_set1_epi32(1));
        }
    }

    /* 3. Elements, one loop per element rule so each is straight-line code. */
#define ELEMENT_LOOP(DIVIDE, SIGN_LT0)                                                             \
    for (size_t b = 0; b < 16 && b < nbg; b++)                                                     \
        block_elements(x + bs * b, codes + 8 * (size_t)nv * b, _mm512_set1_ps(fb[b]), nv, DIVIDE, \
                       SIGN_LT0, k, counting, counting && qz[b] == 0)
    if (p->sign_lt0)
        ELEMENT_LOOP(1, 1);
    else if (p->divide)
        ELEMENT_LOOP(1, 0);
    else
        ELEMENT_LOOP(0, 0);
#undef ELEMENT_LOOP
    return 1;
}

FAST_INLINE size_t fused_run(const lowp_block_fast *p, const float *x, size_t nb,
                             uint8_t *codes, uint8_t *scales, lowp_quant_counts *k,
                             lowp_block_fallback_fn fallback, void *arg, const int nv,
                             const int counting)
{
    const size_t bs = 16 * (size_t)nv;
    size_t done = 0;
    uint8_t scratch[16];
    for (size_t g = 0; g < nb; g += 16) {
        size_t nbg = nb - g < 16 ? nb - g : 16;
        const float *xg = x + bs * g;
        uint8_t *cg = codes + 8 * (size_t)nv * g, *sc = scales != NULL ? scales + g : scratch;
        for (size_t l = 0; l < bs; l++)
            _mm_prefetch((const char *)(xg + LOWP_FAST_PREFETCH + 16 * l), _MM_HINT_T0);
        int ok = nbg == 16 ? fused_group(p, xg, 16, cg, sc, k, nv, counting)
                           : fused_group(p, xg, nbg, cg, sc, k, nv, counting);
        if (ok)
            done += nbg;
        else
            fallback(arg, g, nbg);
    }
    return done;
}

/* One compiled copy per (block size, counting). */
#define RUN_FN(NAME, NV, COUNTING)                                                                 \
    FAST_TARGET static size_t NAME(const lowp_block_fast *p, const float *x, size_t nb,            \
                                   uint8_t *codes, uint8_t *scales, lowp_quant_counts *k,          \
                                   lowp_block_fallback_fn fallback, void *arg)                     \
    {                                                                                              \
        return fused_run(p, x, nb, codes, scales, k, fallback, arg, NV, COUNTING);                 \
    }
RUN_FN(run_nv, 1, 0)
RUN_FN(run_nv_counts, 1, 1)
RUN_FN(run_mx, 2, 0)
RUN_FN(run_mx_counts, 2, 1)

/* ---- AVX2 ----------------------------------------------------------------------
 * The same steps with 8-lane vectors: a group is 8 blocks (one vector of amaxes), a block
 * 2 (NVFP4) or 4 (MXFP4) vectors. AVX2 has no rounding mode per instruction, so the two
 * roundings are done by vroundps, whose immediate gives the mode (MXCSR's rounding field
 * does not matter, as for the AVX-512 additions): v is scaled by the exact power of two
 * 1/q that puts its quantum q at 1, rounded to an integer k there, and the code is read
 * from k and v's binade by an addition that is exact (integers below 2^24). The
 * multiplies and divides of the recipe use MXCSR as block.c's C code does. */

#define FAST2_TARGET __attribute__((target("avx2")))
#define FAST2_INLINE static inline __attribute__((always_inline)) FAST2_TARGET
#define B23 (150 << 23) /* bits of 2^23: an integer k < 2^23 added to it is its low bits */

/* E4M3 code of v >= 0 (never NaN), RN satfinite or RU satfinite, as e4m3_code above (the
 * same clamps). M = max(2^(e + 20), 2^14) for v = 1.f x 2^e, the quantum q = M 2^-23 and
 * 1/q are powers of two, so v / q = v * (1/q) and k q are exact; M + k q is exact too (a
 * multiple of q below 2M), and its bits give the code as in e4m3_code. A binary32
 * subnormal v under RU is code 1 whatever MXCSR.DAZ/FTZ do to v * (1/q). */
FAST2_INLINE __m256i e4m3_code8(__m256 v, const int up)
{
    const __m256i vb = _mm256_castps_si256(v);
    v = _mm256_min_ps(v, _mm256_set1_ps(up ? 448.0f : 464.0f));
    __m256i t = _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(EXP_MASK));
    __m256i bm = _mm256_max_epi32(_mm256_add_epi32(t, _mm256_set1_epi32(20 << 23)),
                                  _mm256_set1_epi32(B14));
    /* biased exponents: q's is M's - 23, 1/q's is 254 - q's = 277 - M's */
    __m256 rq = _mm256_castsi256_ps(_mm256_sub_epi32(_mm256_set1_epi32((int)(277u << 23)), bm));
    __m256 qv = _mm256_castsi256_ps(_mm256_sub_epi32(bm, _mm256_set1_epi32(23 << 23)));
    __m256 kq = up ? _mm256_round_ps(_mm256_mul_ps(v, rq), _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)
                   : _mm256_round_ps(_mm256_mul_ps(v, rq), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 s = _mm256_add_ps(_mm256_mul_ps(kq, qv), _mm256_castsi256_ps(bm));
    __m256i y = _mm256_sub_epi32(_mm256_castps_si256(s), _mm256_set1_epi32(B14));
    __m256i q = _mm256_and_si256(_mm256_add_epi32(y, _mm256_srli_epi32(y, 20)), _mm256_set1_epi32(0xff));
    if (up) { /* 0 < bits(v) < 2^23: subnormal, code 1 (v * (1/q) gave 0 under DAZ/FTZ) */
        __m256i sub = _mm256_and_si256(_mm256_cmpgt_epi32(vb, _mm256_setzero_si256()),
                                       _mm256_cmpgt_epi32(_mm256_set1_epi32(0x800000), vb));
        q = _mm256_or_si256(q, _mm256_and_si256(sub, _mm256_set1_epi32(1)));
    }
    return q;
}

/* E8M0 code of v >= 0 rounded up, as e8m0_up_code above. */
FAST2_INLINE __m256i e8m0_up_code8(__m256 v)
{
    const __m256i b = _mm256_castps_si256(v), zero = _mm256_setzero_si256();
    __m256i e = _mm256_srli_epi32(b, 23);
    __m256i mant = _mm256_and_si256(b, _mm256_set1_epi32(0x7fffff));
    __m256i subn = _mm256_cmpeq_epi32(_mm256_and_si256(b, _mm256_set1_epi32(EXP_MASK)), zero);
    __m256i frac = _mm256_xor_si256(_mm256_cmpeq_epi32(mant, zero), _mm256_set1_epi32(-1));
    __m256i above = _mm256_cmpgt_epi32(mant, _mm256_set1_epi32(0x400000));
    /* normal: up if any fraction bit; subnormal: up if above 2^-127 */
    __m256i up = _mm256_blendv_epi8(frac, above, subn);
    return _mm256_sub_epi32(e, up); /* up is -1 where set */
}

/* The clean 4-bit E2M1 code of v (never NaN; +-Inf allowed), as e2m1_code above. With
 * a = min(|v|, 6) and e' = max(e, 0) for a = 1.f x 2^e (a <= 6: e' <= 2), the quantum is
 * 2^(e' - 1), so k = RN(a 2^(1 - e')) is in [0, 4] (exact scaling: a 2^(1-e') <= 4) and the
 * magnitude code is k + 2 e' (k in [2, 4] when e' > 0; a carry k = 4 is the next binade's
 * first code). The bits of 2^(1 - e') are min((255 << 23) - bits(2^e), 128 << 23), and
 * 2 e' = 256 - (those bits >> 22). The sign (8: bit 31 shifted to bit 3) and k + 2 e' are
 * added to 2^23 exactly. */
FAST2_INLINE __m256i e2m1_code8(__m256 v, const int sign_lt0)
{
    const __m256 six = _mm256_set1_ps(6.0f);
    __m256 a = _mm256_min_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), six);
    __m256i t = _mm256_and_si256(_mm256_castps_si256(a), _mm256_set1_epi32(EXP_MASK));
    __m256i rq = _mm256_min_epi32(_mm256_sub_epi32(_mm256_set1_epi32(255 << 23), t),
                                  _mm256_set1_epi32(128 << 23));
    __m256 k = _mm256_round_ps(_mm256_mul_ps(a, _mm256_castsi256_ps(rq)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 sbit = sign_lt0 ? _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ) : v;
    __m256i sgn = _mm256_srli_epi32(_mm256_castps_si256(_mm256_and_ps(sbit, _mm256_set1_ps(-0.0f))), 28);
    __m256i add = _mm256_add_epi32(_mm256_sub_epi32(_mm256_set1_epi32(B23 + 256), _mm256_srli_epi32(rq, 22)), sgn);
    __m256 s = _mm256_add_ps(k, _mm256_castsi256_ps(add));
    return _mm256_sub_epi32(_mm256_castps_si256(s), _mm256_set1_epi32(B23));
}

/* Codes of 64 elements (8 vectors) to 32 bytes, element 2i in the low nibble, built from
 * two halves of 4 vectors each: per 128-bit lane, packusdw and packuswb keep each vector's
 * half in order and pmaddubsw (lo + 16 hi) joins the nibbles; the final packuswb leaves
 * in lane l 2 bytes per vector (its elements 4l..4l+3), vectors in order, and the 16-bit
 * unpacks of lane 0 with lane 1 interleave them back into element order. Only the first
 * nbytes (a multiple of 4) are stored. */
FAST2_INLINE __m256i pack_half8(__m256i c0, __m256i c1, __m256i c2, __m256i c3)
{
    __m256i b = _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    return _mm256_maddubs_epi16(b, _mm256_set1_epi16(0x1001)); /* bytes 1, 16 */
}

FAST2_INLINE void store_packed8(uint8_t *dst, __m256i w0, __m256i w1, size_t nbytes)
{
    __m256i r = _mm256_packus_epi16(w0, w1);
    __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
    __m128i o0 = _mm_unpacklo_epi16(lo, hi), o1 = _mm_unpackhi_epi16(lo, hi);
    if (nbytes == 32) {
        _mm_storeu_si128((__m128i *)(void *)dst, o0);
        _mm_storeu_si128((__m128i *)(void *)(dst + 16), o1);
    } else {
        uint8_t tmp[32];
        _mm_storeu_si128((__m128i *)(void *)tmp, o0);
        _mm_storeu_si128((__m128i *)(void *)(tmp + 16), o1);
        memcpy(dst, tmp, nbytes);
    }
}

/* Counts of 8 elements, as count_vec above. */
FAST2_INLINE void count_vec8(lowp_quant_counts *k, __m256 x, __m256 v, __m256i code, int scale_zero)
{
    unsigned nz = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NEQ_OQ));
    unsigned magz = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(
        _mm256_and_si256(code, _mm256_set1_epi32(7)), _mm256_setzero_si256())));
    unsigned fl = scale_zero ? nz : nz & magz;
    unsigned sat = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(
        _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v), _mm256_set1_ps(6.0f), _CMP_GT_OQ));
    k->flushed += (size_t)__builtin_popcount(fl);
    k->saturated += (size_t)__builtin_popcount(sat);
}

/* The code vector t of a group (x[8t, 8t + 8), block t / nv), or zero past nvec. */
FAST2_INLINE __m256i element_vec8(const float *restrict x, const float *fb, const int *qz,
                                  const size_t t, const size_t nvec, const int nv,
                                  const int divide, const int sign_lt0, lowp_quant_counts *k,
                                  const int counting)
{
    if (t >= nvec)
        return _mm256_setzero_si256();
    size_t b = t / (size_t)nv;
    __m256 xv = _mm256_loadu_ps(x + 8 * t), fv = _mm256_set1_ps(fb[b]);
    __m256 v = divide ? _mm256_div_ps(xv, fv) : _mm256_mul_ps(xv, fv);
    __m256i c = e2m1_code8(v, sign_lt0);
    if (counting)
        count_vec8(k, xv, v, c, qz[b] == 0);
    return c;
}

/* Elements of a group: nvec = nbg * nv valid vectors (nv per block), factors fb, in units
 * of 8 vectors (32 code bytes), 4 vectors at a time so that few registers are live. */
FAST2_INLINE void group_elements8(const float *restrict x, uint8_t *restrict codes,
                                  const float *fb, const int *qz, const size_t nbg, const int nv,
                                  const int divide, const int sign_lt0, lowp_quant_counts *k,
                                  const int counting)
{
    const size_t nvec = nbg * (size_t)nv;
#define EV(T) element_vec8(x, fb, qz, (T), nvec, nv, divide, sign_lt0, k, counting)
    for (size_t u = 0; u < (size_t)nv && 8 * u < nvec; u++) {
        size_t t = 8 * u;
        __m256i w0 = pack_half8(EV(t), EV(t + 1), EV(t + 2), EV(t + 3));
        __m256i w1 = pack_half8(EV(t + 4), EV(t + 5), EV(t + 6), EV(t + 7));
        size_t left = nvec - t;
        store_packed8(codes + 32 * u, w0, w1, left >= 8 ? 32 : 4 * left);
    }
#undef EV
}

/* One group of nbg <= 8 blocks of 8 * nv elements (nv = 2: NVFP4, 4: MXFP4), as
 * fused_group above: 1 when done, 0 when left to the generic path with nothing written. */
FAST2_INLINE int fused_group8(const lowp_block_fast *p, const float *restrict x, const size_t nbg,
                              uint8_t *restrict codes, uint8_t *restrict scales,
                              lowp_quant_counts *k, const int nv, const int counting)
{
    const size_t bs = 8 * (size_t)nv;
    const unsigned valid = nbg >= 8 ? 0xffu : (1u << nbg) - 1u;
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    const __m256 zero = _mm256_setzero_ps();
    /* 1. Block amax as integers (the order of |x| for finite x; NaN and Inf are caught). */
    __m256i a[8];
    for (size_t b = 0; b < 8; b++) {
        a[b] = _mm256_setzero_si256();
        if (b < nbg)
            for (int h = 0; h < nv; h++)
                a[b] = _mm256_max_epu32(a[b], _mm256_and_si256(_mm256_castps_si256(_mm256_loadu_ps(x + bs * b + 8 * h)), absmask));
    }
    /* The transposing max tree: two vshufps levels leave in 128-bit lane l of a[i] the
     * max over lanes 4l..4l+3 of blocks 4i..4i+3; vperm2i128 maxes the two lanes, so lane
     * b of a[0] is block b's amax. */
    for (size_t i = 0; i < 4; i++) {
        __m256 p0 = _mm256_castsi256_ps(a[2 * i]), p1 = _mm256_castsi256_ps(a[2 * i + 1]);
        a[i] = _mm256_max_epu32(_mm256_castps_si256(_mm256_shuffle_ps(p0, p1, 0x88)),
                                _mm256_castps_si256(_mm256_shuffle_ps(p0, p1, 0xdd)));
    }
    for (size_t i = 0; i < 2; i++) {
        __m256 p0 = _mm256_castsi256_ps(a[2 * i]), p1 = _mm256_castsi256_ps(a[2 * i + 1]);
        a[i] = _mm256_max_epu32(_mm256_castps_si256(_mm256_shuffle_ps(p0, p1, 0x88)),
                                _mm256_castps_si256(_mm256_shuffle_ps(p0, p1, 0xdd)));
    }
    a[0] = _mm256_max_epu32(_mm256_permute2x128_si256(a[0], a[1], 0x20),
                            _mm256_permute2x128_si256(a[0], a[1], 0x31));
    if ((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_cmpgt_epi32(a[0], _mm256_set1_epi32(EXP_MASK - 1)))) & valid)
        return 0; /* NaN or Inf input */
    const __m256 m = _mm256_castsi256_ps(a[0]);

    /* 2. Scale code: block_scales' arithmetic, the same operations in the same order. */
    __m256i q;
    if (nv == 4) {
        if (p->recipe == LOWP_RECIPE_OCP)
            q = _mm256_max_epi32(_mm256_sub_epi32(_mm256_srli_epi32(a[0], 23), _mm256_set1_epi32(2)),
                                 _mm256_setzero_si256());
        else
            q = e8m0_up_code8(_mm256_mul_ps(m, _mm256_set1_ps(p->mul_a)));
    } else {
        __m256 sf;
        switch (p->recipe) {
        case LOWP_RECIPE_TRTLLM:
        case LOWP_RECIPE_SGLANG_KV:
            sf = _mm256_mul_ps(_mm256_set1_ps(p->mul_b), _mm256_mul_ps(m, _mm256_set1_ps(p->mul_a)));
            break;
        case LOWP_RECIPE_EXACT:
            sf = _mm256_mul_ps(m, _mm256_set1_ps(p->mul_a));
            break;
        default: {
            __m256 s = _mm256_div_ps(m, _mm256_set1_ps(p->mul_a));
            s = _mm256_blendv_ps(s, _mm256_set1_ps(1.0f), _mm256_cmp_ps(s, zero, _CMP_EQ_OQ));
            sf = _mm256_max_ps(s, _mm256_set1_ps(0x1p-9f));
            if ((unsigned)_mm256_movemask_ps(_mm256_cmp_ps(sf, _mm256_set1_ps(448.0f), _CMP_GT_OQ)) & valid)
                return 0;
            break;
        }
        }
        q = e4m3_code8(sf, p->scale_up);
    }
    /* Lanes past nbg have m = 0, so q is a valid index (0, or 0x38 under modelopt). */
    __m256 f = p->zero_factor
                   ? _mm256_mask_i32gather_ps(zero, p->factor_of_code, q,
                                              _mm256_cmp_ps(m, zero, _CMP_NEQ_OQ), 4)
                   : _mm256_i32gather_ps(p->factor_of_code, q, 4);
    const __m256i expm = _mm256_set1_epi32(EXP_MASK);
    unsigned bad = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
        _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(f), expm), expm)));
    if (p->divide)
        bad |= (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(f, zero, _CMP_EQ_OQ));
    if (bad & valid)
        return 0;
    __m128i qw = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    __m128i qb = _mm_packus_epi16(qw, qw);
    if (nbg >= 8) {
        _mm_storel_epi64((__m128i *)(void *)scales, qb);
    } else {
        uint8_t tmp[16];
        _mm_storeu_si128((__m128i *)(void *)tmp, qb);
        memcpy(scales, tmp, nbg);
    }
    float fb[8] __attribute__((aligned(32)));
    int qz[8] __attribute__((aligned(32)));
    _mm256_store_ps(fb, f);
    if (counting) {
        k->elements += bs * nbg;
        k->blocks += nbg;
        if (nv == 2) {
            unsigned z = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
                _mm256_cmpeq_epi32(q, _mm256_setzero_si256())));
            unsigned sub = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_and_si256(
                _mm256_cmpgt_epi32(q, _mm256_setzero_si256()), _mm256_cmpgt_epi32(_mm256_set1_epi32(8), q))));
            k->scale_zero += (size_t)__builtin_popcount(z & valid);
            k->scale_subnormal += (size_t)__builtin_popcount(sub & valid);
            _mm256_store_si256((__m256i *)(void *)qz, q);
        } else {
            _mm256_store_si256((__m256i *)(void *)qz, _mm256_set1_epi32(1));
        }
    }

    /* 3. Elements, one loop per element rule so each is straight-line code. */
    if (p->sign_lt0)
        group_elements8(x, codes, fb, qz, nbg, nv, 1, 1, k, counting);
    else if (p->divide)
        group_elements8(x, codes, fb, qz, nbg, nv, 1, 0, k, counting);
    else
        group_elements8(x, codes, fb, qz, nbg, nv, 0, 0, k, counting);
    return 1;
}

FAST2_INLINE size_t fused_run8(const lowp_block_fast *p, const float *x, size_t nb,
                               uint8_t *codes, uint8_t *scales, lowp_quant_counts *k,
                               lowp_block_fallback_fn fallback, void *arg, const int nv,
                               const int counting)
{
    const size_t bs = 8 * (size_t)nv;
    size_t done = 0;
    uint8_t scratch[8];
    for (size_t g = 0; g < nb; g += 8) {
        size_t nbg = nb - g < 8 ? nb - g : 8;
        const float *xg = x + bs * g;
        uint8_t *cg = codes + 4 * (size_t)nv * g, *sc = scales != NULL ? scales + g : scratch;
        for (size_t l = 0; l < bs / 2; l++) /* one prefetch per 64-byte line of the group */
            _mm_prefetch((const char *)(xg + LOWP_FAST_PREFETCH + 16 * l), _MM_HINT_T0);
        int ok = nbg == 8 ? fused_group8(p, xg, 8, cg, sc, k, nv, counting)
                          : fused_group8(p, xg, nbg, cg, sc, k, nv, counting);
        if (ok)
            done += nbg;
        else
            fallback(arg, g, nbg);
    }
    return done;
}

#define RUN8_FN(NAME, NV, COUNTING)                                                                \
    FAST2_TARGET static size_t NAME(const lowp_block_fast *p, const float *x, size_t nb,           \
                                    uint8_t *codes, uint8_t *scales, lowp_quant_counts *k,         \
                                    lowp_block_fallback_fn fallback, void *arg)                    \
    {                                                                                              \
        return fused_run8(p, x, nb, codes, scales, k, fallback, arg, NV, COUNTING);                \
    }
RUN8_FN(run8_nv, 2, 0)
RUN8_FN(run8_nv_counts, 2, 1)
RUN8_FN(run8_mx, 4, 0)
RUN8_FN(run8_mx_counts, 4, 1)

size_t lowp_block_fast_quantize(const lowp_block_fast *p, const float *x, size_t nb,
                                uint8_t *codes, uint8_t *scales, lowp_quant_counts *counts,
                                lowp_block_fallback_fn fallback, void *arg)
{
    int mx = p->format == LOWP_MXFP4, c = counts != NULL;
    if (p->isa == LOWP_BLOCK_ISA_AVX512)
        return (mx ? (c ? run_mx_counts : run_mx) : (c ? run_nv_counts : run_nv))(
            p, x, nb, codes, scales, counts, fallback, arg);
    return (mx ? (c ? run8_mx_counts : run8_mx) : (c ? run8_nv_counts : run8_nv))(
        p, x, nb, codes, scales, counts, fallback, arg);
}

#else /* no fused kernel on this target: lowp_block_fast_init returns 0 */

size_t lowp_block_fast_quantize(const lowp_block_fast *p, const float *x, size_t nb,
                                uint8_t *codes, uint8_t *scales, lowp_quant_counts *counts,
                                lowp_block_fallback_fn fallback, void *arg)
{
    (void)p, (void)x, (void)codes, (void)scales, (void)counts;
    fallback(arg, 0, nb);
    return 0;
}

#endif
