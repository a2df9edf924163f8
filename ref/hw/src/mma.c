/* ref/hw/src/mma.c: bit-exact model of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 * (lowp/mma.h states the arithmetic, the rules and where each comes from).
 *
 * Representation. Every term of a fused step is an unsigned integer significand `sig`
 * with `fb` fraction bits, an alignment exponent `e` and a sign:
 *     value = (-1)^neg * sig * 2^(e - fb)
 *   bf16 operand: sig = (1 << 7 | frac) for normals, frac for subnormals and zero, with
 *                 e = max(biased - 127, -126): MMA-Sim's decomposition, |s| = sig / 2^7;
 *   product:      sig = sig_a * sig_b (< 2^16, exact), e = ea + eb, fb = 14;
 *                 prod_norm: sig >= 2^15 (significand >= 2) counts as e + 1, fb = 15;
 *   C (binary32): sig = (1 << 23 | frac) or frac, e = max(biased - 127, -126), fb = 23.
 * Alignment to E = max e, truncation toward zero to n_frac fraction bits below E:
 *     t = trunc(sig * 2^(n_frac + e - E - fb))      (an integer; shift left or right)
 * Invariants: e - E <= 0, so the left shift is at most n_frac - 14 <= 34 and
 * |t| < 2^(16 + 34) for products, < 2^(24 + 25) for C; the sum of at most 64 + 1 terms
 * stays below 2^57: exact in int64. The sum's unit is 2^(E - n_frac).
 * c_in_window = 0 adds two such exact values whose exponents may be ~500 apart; that sum
 * is formed on a 2^(hi - 101) grid with a sticky bit for the smaller operand's lost
 * bits (add_sticky: the directed rounding of the result, whose ulp is >= 2^(hi - 26),
 * is unchanged by that, see the proof there).
 * lowp_mma_sm90_bf16's parameters take a fast path (below: the same arithmetic on 32-bit
 * lanes, AVX2 where available); every other set, and the batch API, the general one.
 * Nothing here uses floating-point arithmetic: bits in, bits out. */
#include "lowp/bits.h"
#include "lowp/mma.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

#define NAN_BITS 0x7FFFFFFFu
#define PINF_BITS 0x7F800000u
#define NINF_BITS 0xFF800000u
#define MULTI_MAX_K 64

/* The record, established by gpu/probe/mma_probe.cu on an NVIDIA H200 (sm_90, driver
 * 580.159.04, CUDA 13.0; 2026-11-29): 0 mismatches on 48 probes and 2 x 10^7 random
 * outputs (two seeds), the only one of the 200 candidate sets with 0 (next best:
 * e_zero -134, 700-1000 mismatches; n_frac 24/26, group 8, C outside the window, zero rule
 * arithmetic.py or skip, prod_norm: each rejected by probes and random data). The values
 * are MMA-Sim's Hopper ones (lowp/mma.h): group 16 (no split-K on Hopper, nv.py
 * is_split_k; fdpa.py L_max = 32 bytes / 2), n_frac 25 (nv.py
 * arch_accum_fractional_bits), C in the window (fused_sum takes C as a term), zero terms
 * at -133 (fdpa.py e_zero, MMA-Sim's value for Hopper f16 mma), products not
 * renormalised. The first run also settled the zero sign: the hardware gives +0 for every
 * zero result (lowp/mma.h), where IEEE / fdpa.py give -0 (285 of 10^7 outputs). */
const lowp_mma_params lowp_mma_sm90_bf16 = {16, 25, 1, LOWP_MMA_ZERO_FIXED, -133, 0};

/* ---------------------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------------------- */

/* One decoded product a*b. */
typedef struct prod {
    uint32_t sig; /* sig_a * sig_b, fb = 14 */
    int e;        /* ea + eb (a zero operand counts as -126, MMA-Sim's decomposition) */
    uint8_t neg;  /* sign_a ^ sign_b: also the sign of a zero product */
    uint8_t nan;  /* a NaN operand, or Inf * 0 */
    uint8_t inf;  /* Inf * nonzero (sign in neg) */
} prod;

static prod decode_prod(uint16_t a, uint16_t b)
{
    prod p;
    const unsigned ea8 = (a >> 7) & 0xFFu, eb8 = (b >> 7) & 0xFFu;
    const unsigned fa = a & 0x7Fu, fb = b & 0x7Fu;
    p.neg = (uint8_t)(((a ^ b) >> 15) & 1u);
    p.nan = 0;
    p.inf = 0;
    p.sig = 0;
    p.e = 0;
    const int a_nan = ea8 == 0xFF && fa != 0, b_nan = eb8 == 0xFF && fb != 0;
    const int a_inf = ea8 == 0xFF && fa == 0, b_inf = eb8 == 0xFF && fb == 0;
    const int a_zero = (a & 0x7FFFu) == 0, b_zero = (b & 0x7FFFu) == 0;
    if (a_nan || b_nan || (a_inf && b_zero) || (b_inf && a_zero)) {
        p.nan = 1;
        return p;
    }
    if (a_inf || b_inf) {
        p.inf = 1;
        return p;
    }
    const uint32_t sa = ea8 ? (0x80u | fa) : fa, sb = eb8 ? (0x80u | fb) : fb;
    const int xa = ea8 ? (int)ea8 - 127 : -126, xb = eb8 ? (int)eb8 - 127 : -126;
    p.sig = sa * sb;
    p.e = xa + xb;
    return p;
}

static int bitlen64(uint64_t x)
{
    return x ? 64 - __builtin_clzll(x) : 0;
}

static int bitlen128(u128 x)
{
    const uint64_t hi = (uint64_t)(x >> 64);
    return hi ? 64 + bitlen64(hi) : bitlen64((uint64_t)x);
}

/* ---------------------------------------------------------------------------------------
 * Rounding: value m * 2^E (exact) -> binary32, toward zero, subnormals kept, >= 2^128 ->
 * Inf, and a zero result (m == 0, or a nonzero m below 2^-149) is +0: lowp/mma.h's rules.
 * ------------------------------------------------------------------------------------- */
static uint32_t round_rz(i128 m, int E)
{
    if (m == 0)
        return 0u;
    const uint32_t sign = m < 0 ? 0x80000000u : 0u;
    const u128 mag = m < 0 ? -(u128)m : (u128)m;
    const int top = E + bitlen128(mag) - 1; /* exponent of the leading bit */
    if (top >= 128)
        return sign | PINF_BITS;
    const int er = top < -126 ? -126 : top; /* result exponent; -126 for subnormals */
    const int sh = (er - 23) - E;           /* drop sh bits (RZ) to keep 24 (or fewer) */
    u128 q;
    if (sh > 0)
        q = sh >= 128 ? 0 : mag >> sh;
    else
        q = mag << -sh; /* bitlen(q) = top - er + 24 <= 24: no overflow */
    const uint32_t qq = (uint32_t)q; /* < 2^24 */
    if (qq == 0)
        return 0u; /* a nonzero value below 2^-149: +0 whatever its sign (measured) */
    if (qq >= 0x800000u)
        return sign | ((uint32_t)(er + 127) << 23) | (qq - 0x800000u);
    return sign | qq; /* subnormal: er == -126 */
}

/* m * 2^(base - 1) for a term m * 2^e given as its part on the 2^base grid plus a sticky
 * bit (lowest bit) when e < base lost bits. See add_sticky. */
static i128 sticky_part(int64_t m, int e, int base)
{
    if (m == 0)
        return 0;
    const uint64_t mag = m < 0 ? (uint64_t)0 - (uint64_t)m : (uint64_t)m;
    u128 v;
    if (e >= base) {
        v = (u128)mag << (e - base + 1);
    } else {
        const int sh = base - e;
        const uint64_t q = sh >= 64 ? 0 : mag >> sh;
        const int lost = sh >= 64 ? 1 : (mag & ((UINT64_C(1) << sh) - 1)) != 0;
        v = ((u128)q << 1) | (u128)lost;
    }
    return m < 0 ? -(i128)v : (i128)v;
}

/* x = m1 * 2^e1 + m2 * 2^e2 (both nonzero, |m| < 2^63) as *m * 2^*e, exactly when the
 * exponents are within ~100 bits, otherwise with the smaller operand replaced by its
 * truncation to the 2^base grid plus a sticky unit at 2^(base - 1), base = hi - 100,
 * hi = the larger top-bit position. Why RZ is unchanged: an operand with e < base has
 * |m| < 2^63, so its magnitude is < 2^(base + 63) = 2^(hi - 37); the other operand's
 * magnitude is >= 2^(hi - 1), so |x| >= 2^(hi - 2) and the binary32 ulp at x (normal or
 * subnormal alike) is >= 2^(hi - 26) > 2^base. The exact x and its replacement lie in the
 * same open interval between consecutive multiples of 2^base (or are both equal to one),
 * hence between the same two consecutive binary32 values, on the same side of zero:
 * RZ maps them to the same result. */
static void add_sticky(int64_t m1, int e1, int64_t m2, int e2, i128 *m, int *e)
{
    const int t1 = e1 + bitlen64(m1 < 0 ? (uint64_t)0 - (uint64_t)m1 : (uint64_t)m1);
    const int t2 = e2 + bitlen64(m2 < 0 ? (uint64_t)0 - (uint64_t)m2 : (uint64_t)m2);
    const int hi = t1 > t2 ? t1 : t2;
    const int base = hi - 100;
    *m = sticky_part(m1, e1, base) + sticky_part(m2, e2, base); /* each < 2^102 */
    *e = base - 1;
}

/* ---------------------------------------------------------------------------------------
 * One fused step: products p[0..n) and C (binary32 bits) under P.
 * ------------------------------------------------------------------------------------- */

/* trunc(sig * 2^sh) with sign: the aligned, truncated term on the 2^(E - n_frac) grid.
 * sig < 2^24 and sh <= 34 (header invariants): sig << 34 < 2^58, then one right shift
 * by 34 - sh >= 0 truncates (a magnitude, so toward zero); >= 64 leaves nothing. */
static int64_t aligned(uint32_t sig, int sh, int neg)
{
    const int r = 34 - sh;
    const uint64_t t = r >= 64 ? 0 : ((uint64_t)sig << 34) >> r;
    const int64_t m = -(int64_t)neg; /* 0 or all ones */
    return ((int64_t)t ^ m) - m;
}

static uint32_t step(const prod *p, size_t n, uint32_t cbits, const lowp_mma_params *P)
{
    /* Specials first (lowp/mma.h): NaN, Inf - Inf, Inf. */
    const unsigned ce8 = (cbits >> 23) & 0xFFu;
    const uint32_t cfrac = cbits & 0x7FFFFFu;
    const int cneg = (int)(cbits >> 31);
    unsigned any_special = ce8 == 0xFF;
    for (size_t i = 0; i < n; i++)
        any_special |= (unsigned)p[i].nan | p[i].inf;
    if (any_special) {
        int nan = ce8 == 0xFF && cfrac != 0;
        int pinf = ce8 == 0xFF && cfrac == 0 && !cneg;
        int ninf = ce8 == 0xFF && cfrac == 0 && cneg;
        for (size_t i = 0; i < n; i++) {
            nan |= p[i].nan;
            pinf |= p[i].inf && !p[i].neg;
            ninf |= p[i].inf && p[i].neg;
        }
        if (nan || (pinf && ninf))
            return NAN_BITS;
        return pinf ? PINF_BITS : NINF_BITS;
    }

    /* Exponents. A term that takes no part in the max has e = INT_MIN. */
    int ep[MULTI_MAX_K];
    uint8_t fbp[MULTI_MAX_K];
    int E = INT_MIN;
    for (size_t i = 0; i < n; i++) {
        int e;
        uint8_t f = 14;
        if (p[i].sig == 0) {
            e = P->zero_mode == LOWP_MMA_ZERO_SUBNORMAL ? p[i].e
                : P->zero_mode == LOWP_MMA_ZERO_FIXED   ? P->e_zero
                                                        : INT_MIN;
        } else {
            e = p[i].e;
            if (P->prod_norm && p[i].sig >= 0x8000u) {
                e += 1;
                f = 15;
            }
        }
        ep[i] = e;
        fbp[i] = f;
        if (e > E)
            E = e;
    }
    const uint32_t csig = ce8 ? (0x800000u | cfrac) : cfrac;
    const int ce = ce8 ? (int)ce8 - 127 : -126;
    const int nf = P->n_frac;

    if (P->c_in_window) {
        int e_c = INT_MIN;
        if (csig != 0)
            e_c = ce;
        else if (P->zero_mode == LOWP_MMA_ZERO_SUBNORMAL)
            e_c = -126;
        else if (P->zero_mode == LOWP_MMA_ZERO_FIXED)
            e_c = P->e_zero;
        if (e_c > E)
            E = e_c;
        if (E == INT_MIN) /* every term a skipped zero */
            return 0u;
        int64_t S = 0;
        for (size_t i = 0; i < n; i++)
            if (p[i].sig)
                S += aligned(p[i].sig, nf + ep[i] - E - fbp[i], p[i].neg);
        if (csig)
            S += aligned(csig, nf + ce - E - 23, cneg);
        return round_rz((i128)S, E - nf);
    }

    /* C outside the window: products' truncated sum, then + C exactly, one RZ. */
    int64_t S = 0;
    if (E != INT_MIN)
        for (size_t i = 0; i < n; i++)
            if (p[i].sig)
                S += aligned(p[i].sig, nf + ep[i] - E - fbp[i], p[i].neg);
    if (S == 0)
        return csig == 0 ? 0u : cbits; /* 0 + C = C, a binary32 already; zero is +0 */
    if (csig == 0)
        return round_rz((i128)S, E - nf);
    const int64_t mc = cneg ? -(int64_t)csig : (int64_t)csig;
    i128 m;
    int e;
    add_sticky(S, E - nf, mc, ce - 23, &m, &e);
    return round_rz(m, e);
}

static int params_ok(const lowp_mma_params *P)
{
    return P->n_frac >= 0 && P->n_frac <= LOWP_MMA_MAX_NFRAC && P->zero_mode >= 0 &&
           P->zero_mode <= LOWP_MMA_ZERO_SKIP && P->e_zero >= -1000 && P->e_zero <= 1000;
}

/* Chained steps over decoded products p[0..k). */
static uint32_t chain(const prod *p, size_t k, uint32_t cbits, const lowp_mma_params *P)
{
    if (!params_ok(P))
        return NAN_BITS;
    const size_t g = P->group <= 0 ? k : (size_t)P->group;
    for (size_t i = 0; i < k; i += g) {
        const size_t n = k - i < g ? k - i : g;
        cbits = step(p + i, n, cbits, P);
    }
    return cbits;
}

/* ---------------------------------------------------------------------------------------
 * Fast path: lowp_mma_sm90_bf16's values exactly (group 16, n_frac 25, C in the window,
 * zero terms at -133, products not renormalised), the decode kernel's case; the same
 * arithmetic as step() specialised to them, with no product buffer and narrower integers.
 * Exponents are biased by 254 (a product's ea + eb + 254 = xa + xb with x = max(biased
 * exponent field, 1) in 1..254); a zero term sits at -133 + 254 = FAST_EZERO.
 * Alignment with E = the step's max biased exponent, d = E - e >= 0 (n_frac = 25):
 *   product (sig < 2^16, fb 14): t = trunc(sig * 2^(25 + e - E - 14)) = (sig << 11) >> d,
 *   C       (sig < 2^24, fb 23): t = trunc(sig * 2^(25 + e - E - 23)) = (sig << 2) >> d,
 * truncation toward zero as a shift of the magnitude; sig << 11 < 2^27 and sig << 2 < 2^26,
 * so d >= 27 leaves nothing and d can be clamped to 31 for a 32-bit shift. The sum of 16
 * products and C is below 2^31 + 2^26 in magnitude: exact in int64, unit 2^(E - 254 - 25).
 * Its RZ rounding (round_rz64) is round_rz's on a 64-bit magnitude. A NaN or Inf operand
 * or C goes to step() (rare; the rules there). Zero products sit at -133 as in step(),
 * although they never raise E here: C always takes part, at -133 when zero, else >= -126.
 * Two forms of one arithmetic: fast_step (portable C, any n <= 16) and, on x86-64 with
 * GCC or Clang, fast_step16_avx2 (n = 16, chosen at run time when the CPU has AVX2;
 * -DLOWP_MMA_NO_SIMD leaves it out). Bit for bit equal to the general path:
 * tests/test_mma.c compares them (lowp_mma_dot_add_bf16_multi never takes the fast path)
 * on 2 x 10^7 adversarial cases per run; k not a multiple of 16 runs fast_step there. */
#define FAST_EZERO (-133 + 254)

static int is_fast_params(const lowp_mma_params *P)
{
    return P->group == 16 && P->n_frac == 25 && P->c_in_window == 1 &&
           P->zero_mode == LOWP_MMA_ZERO_FIXED && P->e_zero == -133 && P->prod_norm == 0;
}

/* round_rz for m * 2^E, |m| < 2^40 (the same rules on a 64-bit magnitude). */
static inline uint32_t round_rz64(int64_t m, int E)
{
    if (m == 0)
        return 0u;
    const uint32_t sign = (uint32_t)((uint64_t)m >> 32) & 0x80000000u;
    const uint64_t mag = m < 0 ? (uint64_t)0 - (uint64_t)m : (uint64_t)m;
    const int bl = 64 - __builtin_clzll(mag); /* bit length */
    const int top = E + bl - 1;               /* exponent of the leading bit */
    if (top >= 128)
        return sign | PINF_BITS;
    if (top >= -126) { /* normal: the leading 24 bits, the rest dropped (RZ); mag << 24 <
                        * 2^64, and no branch on the shift's direction */
        const uint32_t q = (uint32_t)((mag << 24) >> bl); /* 2^23 <= q < 2^24 */
        return sign | (((uint32_t)(top + 126) << 23) + q); /* q's leading bit bumps the field */
    }
    /* subnormal: q = the multiples of 2^-149, truncated; the value is below 2^-126, so
     * q < 2^23 (a left shift when E > -149 loses nothing) */
    const int sh = -149 - E;
    const uint64_t q = sh >= 64 ? 0 : sh >= 0 ? mag >> sh : mag << -sh;
    return q == 0 ? 0u : sign | (uint32_t)q; /* below 2^-149: +0 whatever the sign */
}

/* A step with a NaN or Inf operand or C: the general step (its rules). Kept out of line
 * (its buffer would otherwise enlarge the fast path's stack frame). */
#ifdef __GNUC__
__attribute__((noinline, cold))
#endif
static uint32_t fast_special(const uint16_t *a, const uint16_t *b, size_t n, uint32_t cbits)
{
    prod buf[16];
    for (size_t i = 0; i < n; i++)
        buf[i] = decode_prod(a[i], b[i]);
    return step(buf, n, cbits, &lowp_mma_sm90_bf16);
}

/* C's biased exponent (x + 127, FAST_EZERO for a zero C) and significand (fb 23). */
static inline int fast_c(uint32_t cbits, uint32_t *csig)
{
    const unsigned ce8 = (cbits >> 23) & 0xFFu;
    *csig = (cbits & 0x7FFFFFu) | (uint32_t)(ce8 != 0) << 23;
    return *csig ? (int)(ce8 + (ce8 == 0)) + 127 : FAST_EZERO;
}

/* The products' truncated sum, given modulo 2^32 (its magnitude is below 2^31, see
 * above), plus C's term, rounded. */
static inline uint32_t fast_finish(uint32_t sp, int E, uint32_t cbits, uint32_t csig, int ec)
{
    const int dc = E - ec;
    const int64_t tc = (int64_t)((csig << 2) >> (dc < 31 ? dc : 31));
    const int64_t s = (int64_t)(sp ^ 0x80000000u) - INT64_C(0x80000000); /* signed value */
    return round_rz64(s + (cbits >> 31 ? -tc : tc), E - 254 - 25);
}

/* One step of n <= 16 products a[i] * b[i] and C under lowp_mma_sm90_bf16's values;
 * portable C (out of line: the AVX2 caller stays small). */
#ifdef __GNUC__
__attribute__((noinline))
#endif
static uint32_t fast_step(const uint16_t *a, const uint16_t *b, size_t n, uint32_t cbits)
{
    uint32_t sig[16];
    int ex[16];
    unsigned neg[16];
    unsigned special = ((cbits >> 23) & 0xFFu) == 0xFFu;
    uint32_t csig;
    int E = fast_c(cbits, &csig);
    const int ec = E;
    for (size_t i = 0; i < n; i++) {
        const unsigned ua = a[i], ub = b[i];
        const unsigned ea8 = (ua >> 7) & 0xFFu, eb8 = (ub >> 7) & 0xFFu;
        special |= (ea8 == 0xFFu) | (eb8 == 0xFFu);
        const uint32_t s = ((ua & 0x7Fu) | (unsigned)(ea8 != 0) << 7) *
                           ((ub & 0x7Fu) | (unsigned)(eb8 != 0) << 7);
        const int e = s ? (int)(ea8 + (ea8 == 0) + eb8 + (eb8 == 0)) : FAST_EZERO;
        sig[i] = s;
        ex[i] = e;
        neg[i] = (ua ^ ub) >> 15;
        E = e > E ? e : E;
    }
    if (special)
        return fast_special(a, b, n, cbits);
    uint32_t sp = 0; /* the products' sum modulo 2^32 */
    for (size_t i = 0; i < n; i++) {
        const int d = E - ex[i];
        const uint32_t t = (sig[i] << 11) >> (d < 31 ? d : 31);
        sp += (t ^ (0u - neg[i])) + neg[i];
    }
    return fast_finish(sp, E, cbits, csig, ec);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(LOWP_MMA_NO_SIMD)
#define FAST_AVX2 1
#include <immintrin.h>

/* fast_step for n = 16 in AVX2, the same arithmetic lane by lane: operands and products
 * in 16-bit lanes (sig_a * sig_b <= 255^2 < 2^16: the low half of the product is exact;
 * biased exponents <= 508), the aligned terms in 32-bit lanes (vpsrlvd gives 0 for a
 * count >= 32, as the clamp to 31 does in fast_step: sig << 11 < 2^27). */
__attribute__((target("avx2"))) static uint32_t fast_step16_avx2(const uint16_t *a,
                                                                 const uint16_t *b,
                                                                 uint32_t cbits)
{
    const __m256i va = _mm256_loadu_si256((const __m256i *)(const void *)a);
    const __m256i vb = _mm256_loadu_si256((const __m256i *)(const void *)b);
    const __m256i z = _mm256_setzero_si256(), ff = _mm256_set1_epi16(0xFF);
    const __m256i m7f = _mm256_set1_epi16(0x7F), m80 = _mm256_set1_epi16(0x80);
    const __m256i ea = _mm256_and_si256(_mm256_srli_epi16(va, 7), ff);
    const __m256i eb = _mm256_and_si256(_mm256_srli_epi16(vb, 7), ff);
    const __m256i sp = _mm256_or_si256(_mm256_cmpeq_epi16(ea, ff), _mm256_cmpeq_epi16(eb, ff));
    if (!_mm256_testz_si256(sp, sp) || ((cbits >> 23) & 0xFFu) == 0xFFu)
        return fast_special(a, b, 16, cbits);
    const __m256i za = _mm256_cmpeq_epi16(ea, z), zb = _mm256_cmpeq_epi16(eb, z); /* -1 */
    const __m256i sa = _mm256_or_si256(_mm256_and_si256(va, m7f), _mm256_andnot_si256(za, m80));
    const __m256i sb = _mm256_or_si256(_mm256_and_si256(vb, m7f), _mm256_andnot_si256(zb, m80));
    const __m256i sig = _mm256_mullo_epi16(sa, sb);
    /* x = e8 + (e8 == 0): e8 - (-1) where the field is 0 */
    __m256i e = _mm256_sub_epi16(_mm256_add_epi16(ea, eb), _mm256_add_epi16(za, zb));
    e = _mm256_blendv_epi8(e, _mm256_set1_epi16(FAST_EZERO), _mm256_cmpeq_epi16(sig, z));
    /* The products' max exponent: lanes are in 2..508, max = 0xFFFF - minpos(0xFFFF - e) */
    const __m128i m = _mm_max_epu16(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
    const int pm =
        0xFFFF - (_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_sub_epi16(_mm_set1_epi16(-1), m))) &
                  0xFFFF);
    /* 32-bit lanes: sig << 11, e, the sign mask (all before C is looked at) */
    const __m256i neg = _mm256_srai_epi16(_mm256_xor_si256(va, vb), 15);
    const __m128i sg0 = _mm256_castsi256_si128(sig), sg1 = _mm256_extracti128_si256(sig, 1);
    const __m256i s0 = _mm256_slli_epi32(_mm256_cvtepu16_epi32(sg0), 11);
    const __m256i s1 = _mm256_slli_epi32(_mm256_cvtepu16_epi32(sg1), 11);
    const __m256i e0 = _mm256_cvtepu16_epi32(_mm256_castsi256_si128(e));
    const __m256i e1 = _mm256_cvtepu16_epi32(_mm256_extracti128_si256(e, 1));
    const __m256i g0 = _mm256_cvtepi16_epi32(_mm256_castsi256_si128(neg));
    const __m256i g1 = _mm256_cvtepi16_epi32(_mm256_extracti128_si256(neg, 1));
    uint32_t csig;
    const int ec = fast_c(cbits, &csig);
    const int E = pm > ec ? pm : ec;
    const __m256i vE = _mm256_set1_epi32(E);
    __m256i t0 = _mm256_srlv_epi32(s0, _mm256_sub_epi32(vE, e0));
    __m256i t1 = _mm256_srlv_epi32(s1, _mm256_sub_epi32(vE, e1));
    t0 = _mm256_sub_epi32(_mm256_xor_si256(t0, g0), g0);
    t1 = _mm256_sub_epi32(_mm256_xor_si256(t1, g1), g1);
    const __m256i t = _mm256_add_epi32(t0, t1);
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0x4E));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, 0xB1));
    return fast_finish((uint32_t)_mm_cvtsi128_si32(sum), E, cbits, csig, ec);
}
#endif

/* The fast path over k: steps of 16, then the shorter last one. */
static inline uint32_t fast_dot_add(const uint16_t *a, const uint16_t *b, size_t k,
                                    uint32_t cb)
{
    size_t i = 0;
#ifdef FAST_AVX2
    if (__builtin_cpu_supports("avx2")) {
        if (k == 16) /* the decode kernel's call */
            return fast_step16_avx2(a, b, cb);
        for (; i + 16 <= k; i += 16)
            cb = fast_step16_avx2(a + i, b + i, cb);
    }
#endif
    for (; i + 16 <= k; i += 16)
        cb = fast_step(a + i, b + i, 16, cb);
    if (i < k)
        cb = fast_step(a + i, b + i, k - i, cb);
    return cb;
}

/* The general path over k. */
#ifdef __GNUC__
__attribute__((noinline))
#endif
static uint32_t general_dot_add(const uint16_t *a, const uint16_t *b, size_t k, uint32_t cb,
                                const lowp_mma_params *p)
{
    if (!params_ok(p))
        return NAN_BITS;
    const size_t g = p->group <= 0 ? k : (size_t)p->group;
    prod buf[MULTI_MAX_K];
    for (size_t i = 0; i < k;) {
        /* A step at a time, in chunks that fit the buffer (a step longer than the buffer
         * is only possible with group > 64 or <= 0 and k > 64). */
        const size_t n = k - i < g ? k - i : g;
        if (n > MULTI_MAX_K)
            return NAN_BITS;
        for (size_t j = 0; j < n; j++)
            buf[j] = decode_prod(a[i + j], b[i + j]);
        cb = step(buf, n, cb, p);
        i += n;
    }
    return cb;
}

float lowp_mma_dot_add_bf16(const uint16_t *a, const uint16_t *b, size_t k, float c,
                            const lowp_mma_params *p)
{
    if (is_fast_params(p))
        return lowp_f32_from_bits(fast_dot_add(a, b, k, lowp_f32_bits(c)));
    return lowp_f32_from_bits(general_dot_add(a, b, k, lowp_f32_bits(c), p));
}

/* Always the general path (chain / step), also for lowp_mma_sm90_bf16: tests/test_mma.c
 * uses it as the reference for the fast path above. */
void lowp_mma_dot_add_bf16_multi(const uint16_t *a, const uint16_t *b, size_t k, float c,
                                 const lowp_mma_params *ps, size_t np, float *out)
{
    if (k > MULTI_MAX_K) {
        for (size_t j = 0; j < np; j++)
            out[j] = lowp_f32_from_bits(NAN_BITS);
        return;
    }
    prod buf[MULTI_MAX_K];
    for (size_t i = 0; i < k; i++)
        buf[i] = decode_prod(a[i], b[i]);
    const uint32_t cb = lowp_f32_bits(c);
    for (size_t j = 0; j < np; j++) {
        out[j] = lowp_f32_from_bits(chain(buf, k, cb, &ps[j]));
    }
}

char *lowp_mma_params_str(const lowp_mma_params *p, char *buf, size_t len)
{
    char z[24];
    if (p->zero_mode == LOWP_MMA_ZERO_FIXED)
        snprintf(z, sizeof z, "z%d", p->e_zero);
    else
        snprintf(z, sizeof z, "%s", p->zero_mode == LOWP_MMA_ZERO_SUBNORMAL ? "zsub" : "zskip");
    snprintf(buf, len, "g%d f%d cin%d %s pn%d", p->group, p->n_frac, p->c_in_window, z,
             p->prod_norm);
    return buf;
}

/* ---------------------------------------------------------------------------------------
 * Probe vectors. Every expected pattern was worked out by hand from the rules in
 * lowp/mma.h (the reasoning is in the `reveals` text); tests/test_mma.c confirms each
 * with the MPFR oracle and the model, so a wrong hand computation fails the suite.
 * ------------------------------------------------------------------------------------- */

/* bf16 bits of +-2^e (normal e), of (1 + m/128) * 2^e, and binary32 bits of 2^e. */
#define BF(e) ((uint16_t)((127 + (e)) << 7))
#define NBF(e) ((uint16_t)(0x8000 | ((127 + (e)) << 7)))
#define BFM(e, m) ((uint16_t)(((127 + (e)) << 7) | (m)))
#define FB(e) ((uint32_t)(127 + (e)) << 23)

/* Parameter sets named by the alternatives. */
#define P_DEF {16, 25, 1, LOWP_MMA_ZERO_FIXED, -133, 0}
#define P_F24 {16, 24, 1, LOWP_MMA_ZERO_FIXED, -133, 0}
#define P_F26 {16, 26, 1, LOWP_MMA_ZERO_FIXED, -133, 0}
#define P_G8 {8, 25, 1, LOWP_MMA_ZERO_FIXED, -133, 0}
#define P_CIN0 {16, 25, 0, LOWP_MMA_ZERO_FIXED, -133, 0}
#define P_PN1 {16, 25, 1, LOWP_MMA_ZERO_FIXED, -133, 1}
#define P_ZSUB {16, 25, 1, LOWP_MMA_ZERO_SUBNORMAL, 0, 0}
#define P_ZSKIP {16, 25, 1, LOWP_MMA_ZERO_SKIP, 0, 0}
#define P_Z132 {16, 25, 1, LOWP_MMA_ZERO_FIXED, -132, 0}
#define P_Z134 {16, 25, 1, LOWP_MMA_ZERO_FIXED, -134, 0}

#define ALT_P(bits, what, params) 1, (bits), (what), 1, params
#define ALT_R(bits, what) 1, (bits), (what), 0, P_DEF
#define NO_ALT 0, 0, "", 0, P_DEF

/* e-zero ladder: c = +0, 2^-140 (k0) - 2^-m (k1), zeros elsewhere. A term -2^-m survives
 * the window iff m <= E - n_frac... i.e. m <= 158 when E = -133 (the zeros' exponent) and
 * n_frac = 25: then 2^-140 - 2^-m rounds (RZ, subnormal grid 2^-149) to 2^-140 - 2^-149 =
 * 0x1FF; when it is truncated away the result is 2^-140 = 0x200. Zero-skip: E = -140,
 * threshold 165; arithmetic.py: C = 0 counts as -126, threshold 151. */
#define LADDER(m) .a = {BF(-70), NBF(-75)}, .b = {BF(-70), BF(75 - (m))}, .c = 0

static const lowp_mma_probe probes[] = {
    /* ---- alignment window (n_frac) and truncation ---- */
    {"win25", "1 + 4*(2^-13*2^-12): four 2^-25 terms kept = at least 25 fraction bits",
     .a = {BF(0), BF(-13), BF(-13), BF(-13), BF(-13)},
     .b = {BF(0), BF(-12), BF(-12), BF(-12), BF(-12)}, .c = 0, .expect = 0x3F800001,
     ALT_P(0x3F800000, "n_frac 24: the 2^-25 terms are truncated away", P_F24)},
    {"win26", "1 + 8*2^-26 = 1 + 2^-23 exactly: the 2^-26 terms are dropped at 25 bits",
     .a = {BF(0), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13)},
     .b = {BF(0), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13)},
     .c = 0, .expect = 0x3F800000,
     ALT_P(0x3F800001, "n_frac 26: kept, 1 + 2^-23", P_F26)},
    {"trunc-neg", "-1 + 2^-25 (research note 4.5): kept, RZ of -(1 - 2^-25) = -(1 - 2^-24)",
     .a = {0xBF80, BF(-13)}, .b = {BF(0), BF(-12)}, .c = 0, .expect = 0xBF7FFFFF,
     ALT_P(0xBF800000, "n_frac 24: 2^-25 dropped, -1", P_F24)},
    {"trunc-zero", "1 - 2^-26: the negative term truncates toward zero (to 0), not floor",
     .a = {BF(0), NBF(-13)}, .b = {BF(0), BF(-13)}, .c = 0, .expect = 0x3F800000,
     ALT_P(0x3F7FFFFF, "n_frac 26 (or floor at 25): 1 - 2^-26 -> RZ 1 - 2^-24", P_F26)},
    {"rz-pos", "1 + 2^-24 + 2^-25 (0.75 ulp): output rounded toward zero",
     .a = {BF(0), BF(-12), BF(-13)}, .b = {BF(0), BF(-12), BF(-12)}, .c = 0,
     .expect = 0x3F800000, ALT_R(0x3F800001, "round to nearest output: 1 + 2^-23")},
    {"rz-neg", "-(1 + 2^-24 + 2^-25): toward zero, not down",
     .a = {0xBF80, NBF(-12), NBF(-13)}, .b = {BF(0), BF(-12), BF(-12)}, .c = 0,
     .expect = 0xBF800000, ALT_R(0xBF800001, "round down (or nearest): -(1 + 2^-23)")},
    {"prodnorm", "1.5*1.5 - 2^-25: a product in [2,4) aligns at exponent ea+eb = 0",
     .a = {BFM(0, 0x40), NBF(-13)}, .b = {BFM(0, 0x40), BF(-12)}, .c = 0,
     .expect = 0x400FFFFF,
     ALT_P(0x40100000, "products renormalised (exponent 1): 2^-25 dropped, 2.25", P_PN1)},
    {"carry16", "16*(255/128)^2 = 63.5009765625: six carry bits above the max exponent kept",
     .a = {0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF,
           0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF},
     .b = {0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF,
           0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF, 0x3FFF},
     .c = 0, .expect = 0x427E0100, NO_ALT},
    /* ---- group: one fused step of 16 or two chained steps of 8 ---- */
    {"group8-a", "1 + 2^-25 (k1) + 3*2^-25 (k8..10): fused = 1 + 2^-23",
     .a = {BF(0), BF(-13), [8] = BF(-13), BF(-13), BF(-13)},
     .b = {BF(0), BF(-12), [8] = BF(-12), BF(-12), BF(-12)}, .c = 0, .expect = 0x3F800001,
     ALT_P(0x3F800000, "two steps of 8: 1 + 2^-25 -> 1, then 1 + 3*2^-25 -> 1", P_G8)},
    {"group8-b", "1 - 2^-25 (k1) + 2^-25 (k8): fused = exactly 1",
     .a = {BF(0), NBF(-13), [8] = BF(-13)}, .b = {BF(0), BF(-12), [8] = BF(-12)}, .c = 0,
     .expect = 0x3F800000,
     ALT_P(0x3F7FFFFF, "two steps of 8: 1 - 2^-25 -> 1 - 2^-24, + 2^-25 -> 1 - 2^-24", P_G8)},
    /* ---- C inside or outside the window ---- */
    {"c-window", "C = 1, products 8*2^-26: C sets the max exponent, 2^-26 dropped",
     .a = {BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13)},
     .b = {BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13), BF(-13)},
     .c = FB(0), .expect = 0x3F800000,
     ALT_P(0x3F800001, "C outside: products sum to 2^-23 exactly, + 1", P_CIN0)},
    {"c-trunc", "1 + C, C = -(2^-3 + 2^-26): C itself is truncated to -2^-3 in the window",
     .a = {BF(0)}, .b = {BF(0)}, .c = 0xBE000001u, .expect = 0x3F600000,
     ALT_P(0x3F5FFFFF, "C outside: 0.875 - 2^-26 -> RZ 0.875 - 2^-24", P_CIN0)},
    {"c-neg-dropped", "1 + C, C = -2^-26: C truncates to -0",
     .a = {BF(0)}, .b = {BF(0)}, .c = 0xB2800000u, .expect = 0x3F800000,
     ALT_P(0x3F7FFFFF, "C outside: 1 - 2^-26 -> RZ 1 - 2^-24", P_CIN0)},
    {"huge-cancel-c", "2^254 - 2^254 + C(1): C is truncated against 2^254 -> +0",
     .a = {BF(127), NBF(127)}, .b = {BF(127), BF(127)}, .c = FB(0), .expect = 0x00000000,
     ALT_P(0x3F800000, "C outside: exact 0 + 1 = 1", P_CIN0)},
    {"huge-cancel", "2^254 - 2^254: exact products, no intermediate overflow, +0",
     .a = {BF(127), NBF(127)}, .b = {BF(127), BF(127)}, .c = 0, .expect = 0x00000000,
     NO_ALT},
    {"c-pass", "zero products + C: C returned unchanged", .c = 0x3FC00001u,
     .expect = 0x3FC00001u, NO_ALT},
    {"c-pass-sub", "zero products + C = -2^-149: subnormal C kept", .c = 0x80000001u,
     .expect = 0x80000001u, NO_ALT},
    /* ---- zero terms' exponent (zero_mode, e_zero) ---- */
    {"zero-exp-prod", "0*2^100 + 2^-40 + 2^-60: does a zero product count as 2^-26?",
     .a = {0x0000, BF(-40), BF(-40)}, .b = {BF(100), BF(0), BF(-20)}, .c = 0,
     .expect = 0x2B800008,
     ALT_P(0x2B800000, "arithmetic.py: zero product exponent -26, 2^-60 dropped", P_ZSUB)},
    {"ezero-151", "2^-140 - 2^-151, C = +0: kept by every zero rule (window floor)",
     LADDER(151), .expect = 0x000001FF, NO_ALT},
    {"ezero-152", "2^-140 - 2^-152, C = +0: kept unless zero C counts as -126",
     LADDER(152), .expect = 0x000001FF,
     ALT_P(0x00000200, "arithmetic.py: C = 0 at -126, 2^-152 dropped", P_ZSUB)},
    {"ezero-158", "2^-140 - 2^-158, C = +0: kept iff zeros sit at e_zero >= -133",
     LADDER(158), .expect = 0x000001FF,
     ALT_P(0x00000200, "e_zero = -132: dropped", P_Z132)},
    {"ezero-159", "2^-140 - 2^-159, C = +0: dropped iff zeros sit at e_zero >= -133",
     LADDER(159), .expect = 0x00000200,
     ALT_P(0x000001FF, "e_zero = -134: kept", P_Z134)},
    {"ezero-165", "2^-140 - 2^-165, C = +0: kept only if zero terms are skipped",
     LADDER(165), .expect = 0x00000200,
     ALT_P(0x000001FF, "zero terms skipped: E = -140, kept", P_ZSKIP)},
    {"ezero-166", "2^-140 - 2^-166, C = +0: dropped by every zero rule", LADDER(166),
     .expect = 0x00000200, NO_ALT},
    {"c-sub-exp", "C = 2^-149 (exponent -126 as a subnormal) + 2^-140 - 2^-155",
     .a = {BF(-70), NBF(-75)}, .b = {BF(-70), BF(-80)}, .c = 0x00000001u,
     .expect = 0x00000201,
     ALT_R(0x00000200, "C aligned by its true exponent -149: 2^-155 kept, RZ 2^-140")},
    /* ---- subnormals ---- */
    {"sub-in", "bf16 subnormal 2^-133 * 2^100 = 2^-33: subnormal inputs not flushed",
     .a = {0x0001}, .b = {BF(100)}, .c = 0, .expect = FB(-33),
     ALT_R(0x00000000, "bf16 subnormal inputs flushed to zero")},
    {"sub-out", "2^-75 * 2^-70 = 2^-145: subnormal output kept", .a = {BF(-75)},
     .b = {BF(-70)}, .c = 0, .expect = 0x00000010,
     ALT_R(0x00000000, "subnormal outputs flushed")},
    {"sub-out-rz", "2^-145 + 3*2^-151: subnormal output rounded toward zero",
     .a = {BF(-75), BF(-75), BF(-75), BF(-75)}, .b = {BF(-70), BF(-76), BF(-76), BF(-76)},
     .c = 0, .expect = 0x00000010, ALT_R(0x00000011, "round to nearest: 2^-145 + 2^-149")},
    {"c-sub-carry", "C = 0x007FFFFF + 2^-149 = 2^-126: subnormal C, carry to normal",
     .a = {BF(-75)}, .b = {BF(-74)}, .c = 0x007FFFFFu, .expect = 0x00800000, NO_ALT},
    /* ---- overflow ---- */
    {"ovf-prod", "2^127 * 2 = 2^128: overflow gives Inf although the rounding is RZ",
     .a = {BF(127)}, .b = {BF(1)}, .c = 0, .expect = PINF_BITS,
     ALT_R(0x7F7FFFFF, "RZ saturates: FLT_MAX")},
    {"ovf-neg", "-2^127 * 2 = -2^128: -Inf", .a = {NBF(127)}, .b = {BF(1)}, .c = 0,
     .expect = NINF_BITS, ALT_R(0xFF7FFFFF, "RZ saturates: -FLT_MAX")},
    {"ovf-c", "FLT_MAX + 2^104 = 2^128 exactly: Inf", .a = {BF(104)}, .b = {BF(0)},
     .c = 0x7F7FFFFFu, .expect = PINF_BITS, ALT_R(0x7F7FFFFF, "RZ saturates: FLT_MAX")},
    {"rz-top", "FLT_MAX + 2^103 < 2^128: RZ gives FLT_MAX", .a = {BF(103)}, .b = {BF(0)},
     .c = 0x7F7FFFFFu, .expect = 0x7F7FFFFF,
     ALT_R(PINF_BITS, "round to nearest: tie to even overflows to Inf")},
    /* ---- NaN and Inf ---- */
    {"nan-a", "NaN operand -> canonical NaN", .a = {0x7FC0}, .b = {BF(0)}, .c = 0,
     .expect = NAN_BITS, NO_ALT},
    {"nan-neg", "negative NaN with payload -> canonical 0x7FFFFFFF", .a = {0xFFC1},
     .b = {BF(0)}, .c = 0, .expect = NAN_BITS, NO_ALT},
    {"nan-c", "NaN C with payload -> canonical NaN", .a = {BF(0)}, .b = {BF(0)},
     .c = 0xFFC00123u, .expect = NAN_BITS, NO_ALT},
    {"inf-zero", "Inf * 0 -> NaN", .a = {0x7F80}, .b = {0x0000}, .c = 0, .expect = NAN_BITS,
     NO_ALT},
    {"inf-inf", "Inf*1 + (-Inf)*1 -> NaN", .a = {0x7F80, 0xFF80}, .b = {BF(0), BF(0)},
     .c = 0, .expect = NAN_BITS, NO_ALT},
    {"inf-cinf", "Inf*1 + C = -Inf -> NaN", .a = {0x7F80}, .b = {BF(0)}, .c = NINF_BITS,
     .expect = NAN_BITS, NO_ALT},
    {"inf", "Inf*1 + 1 -> Inf", .a = {0x7F80}, .b = {BF(0)}, .c = FB(0), .expect = PINF_BITS,
     NO_ALT},
    {"inf-sub", "Inf * (-subnormal) -> -Inf", .a = {0x7F80}, .b = {0x8001}, .c = 0,
     .expect = NINF_BITS, NO_ALT},
    {"c-inf", "C = -Inf + finite products -> -Inf", .a = {BF(0)}, .b = {BF(0)},
     .c = NINF_BITS, .expect = NINF_BITS, NO_ALT},
    /* ---- signed zeros ---- */
    {"zero-pos-cneg", "16 products +0, C = -0: +0 + -0 = +0", .c = 0x80000000u,
     .expect = 0x00000000, NO_ALT},
    {"zero-all-neg", "16 products -0, C = -0: every term -0, still +0",
     .a = {0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000,
           0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000},
     .b = {BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0),
           BF(0), BF(0), BF(0), BF(0), BF(0)},
     .c = 0x80000000u, .expect = 0x00000000u,
     ALT_R(0x80000000u, "IEEE 754 (and fdpa.py): -0 + -0 = -0")},
    {"zero-neg-cpos", "16 products -0, C = +0: +0",
     .a = {0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000,
           0x8000, 0x8000, 0x8000, 0x8000, 0x8000, 0x8000},
     .b = {BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0), BF(0),
           BF(0), BF(0), BF(0), BF(0), BF(0)},
     .c = 0, .expect = 0x00000000, NO_ALT},
    {"zero-cancel", "1 - 1 with C = -0: an exact cancellation is +0", .a = {BF(0), 0xBF80},
     .b = {BF(0), BF(0)}, .c = 0x80000000u, .expect = 0x00000000,
     ALT_R(0x80000000, "round-down-style zero sign: -0")},
    {"neg-underflow", "-2^-150 (kept at E = -133) rounds toward zero to +0, not -0",
     .a = {NBF(-75)}, .b = {BF(-75)}, .c = 0, .expect = 0x00000000u,
     ALT_R(0x80000000u, "IEEE 754 RZ (and fdpa.py): -0")},
    {"neg-trunc-away", "-2^-175, C = -0: truncated away in the window (or, zeros "
     "skipped, RZ to zero): +0",
     .a = {NBF(-75)}, .b = {BF(-100)}, .c = 0x80000000u, .expect = 0x00000000,
     ALT_R(0x80000000u, "IEEE 754 sign of the exact sum: -0")},
};

const lowp_mma_probe *lowp_mma_probes(size_t *n)
{
    *n = sizeof probes / sizeof probes[0];
    return probes;
}

size_t lowp_mma_candidates(lowp_mma_params *out)
{
    static const int zm[5][2] = {{LOWP_MMA_ZERO_SUBNORMAL, 0},
                                 {LOWP_MMA_ZERO_FIXED, -132},
                                 {LOWP_MMA_ZERO_FIXED, -133},
                                 {LOWP_MMA_ZERO_FIXED, -134},
                                 {LOWP_MMA_ZERO_SKIP, 0}};
    size_t n = 0;
    for (int g = 0; g < 2; g++)
        for (int f = 23; f <= 27; f++)
            for (int ci = 0; ci < 2; ci++)
                for (int z = 0; z < 5; z++)
                    for (int pn = 0; pn < 2; pn++)
                        out[n++] = (lowp_mma_params){g ? 16 : 8, f, ci, zm[z][0], zm[z][1], pn};
    return n; /* 2 * 5 * 2 * 5 * 2 = LOWP_MMA_N_CANDIDATES */
}
