/* tests/test_mma.c: the tensor-core MMA model (lowp/mma.h) against an MPFR oracle.
 *
 *   test_mma
 *
 * The oracle is written apart from ref/hw/src/mma.c and shares nothing with it: operands are
 * decoded by MPFR from their binary32 value (a bf16 is the high half of a binary32),
 * the alignment exponent of every term is read off MPFR's exponent (e = EXP - 1, at least
 * -126, as MMA-Sim's frexp-based decomposition), each term is truncated by mpfr_rint(RNDZ)
 * at the binary position 2^(E - n_frac), the terms are summed exactly at 640 bits (every
 * term lies between 2^-310 and 2^264), and the sum is rounded once by mpfr_get_flt(RNDZ),
 * which also gives subnormals the IEEE way; magnitudes >= 2^128 become Inf and every
 * zero result +0 (lowp/mma.h's overflow and zero-sign rules, applied last, explicitly).
 * Specials: the plain exact dot product in MPFR; NaN -> 0x7FFFFFFF, otherwise its Inf.
 *
 * 1. probes: every hand-computed prediction in lowp_mma_probes() (the patterns the GPU
 *    probe compares with the hardware) equals the oracle and the model, for the default
 *    parameters and for each probe's alternative; alternatives differ from the default
 *    (so a probe can tell them apart: n_frac 24 vs 25 vs 26, group 8 vs 16, C in or out
 *    of the window, zero exponent rules, product renormalisation).
 * 2. random: RANDOM_DEFAULT cases with lowp_mma_sm90_bf16 and RANDOM_PER_CAND cases for
 *    each of the 200 candidate parameter sets gpu/probe/mma_probe.cu evaluates, model against
 *    oracle bit for bit; 11 adversarial generators (uniform bits with specials, narrow
 *    exponents, a dominant term with the rest 5..35 binades below, dominant C,
 *    cancellation against C, cancelling pairs, tiny and subnormal, zeros next to huge
 *    partners, halves for group 8/16, overflow, carries).
 * 3. sensitivity: on the random cases, each alternative parameter differs from the
 *    default on a nonzero share (the generators reach every parameter), and the batch
 *    API equals the single one bit for bit.
 * 4. API: k = 0 returns C, bad parameters give NaN, k = 32 chains two k16 steps.
 * 5. fast path: lowp_mma_dot_add_bf16 with lowp_mma_sm90_bf16 (ref/hw/src/mma.c's fast path,
 *    AVX2 where the CPU has it, portable C otherwise and for steps shorter than 16)
 *    against lowp_mma_dot_add_bf16_multi (always the general path) bit for bit on
 *    FAST_CASES cases: the 11 generators above and 9 more (every bf16 pattern swept in
 *    a and in b, random bits, Gaussian decode data, cancellation, sums near 2^128 and
 *    near binary32 underflow, exponents spread over the whole range, zeros and
 *    subnormals), C replaced by special values on a share of them, k = 16 mostly, also
 *    32 and 1..64 (chaining, short last steps); every bf16 pattern must have appeared in
 *    a and in b, and every result class (NaN, +-Inf, +0, subnormal, normal, >= 2^127)
 *    must be reached. Prints ns/call of both paths on Gaussian decode data.
 *
 * The seed (LOWP_SEED overrides) is printed first; cases depend on (seed, index) only. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <mpfr.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lowp/attn_gpu_emul.h" /* lowp_bf16_from_f32 */
#include "lowp/cases.h"
#include "lowp/mma.h"
#include "lowp_test.h"

#define RANDOM_DEFAULT 4000000
#define RANDOM_PER_CAND 20000
#define NKINDS 11
#define ORACLE_PREC 640
#define NCAND_MAX 256
#define FAST_CASES 20000000
#define NFKINDS (NKINDS + 9)

static uint64_t seed = LOWP_DEFAULT_SEED;
static unsigned long long total_checked, total_bad;

static const char *kind_name[NKINDS] = {"uniform", "narrow",  "window", "c-dominant",
                                        "cancel-c", "pairs",  "tiny",   "zeros",
                                        "halves",   "overflow", "carry"};

/* ---------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------- */

/* A failure line, at most LOWP_TEST_SAY_MAX per process (tests/lib). */
#define say(...) lowp_test_say("mma", __VA_ARGS__)

/* n cases checked, bad of them wrong: into the run's totals (printed by main), and the test
 * fails unless bad is 0. */
static void tally(unsigned long long n, unsigned long long bad)
{
    total_checked += n;
    total_bad += bad;
    ck_assert_uint_eq(bad, 0);
}

/* ---------------------------------------------------------------------------------------
 * The oracle
 * ------------------------------------------------------------------------------------- */

typedef struct ows {
    mpfr_t x, y, p, t, s, w;
} ows;

static void ows_init(ows *o)
{
    mpfr_inits2(ORACLE_PREC, o->x, o->y, o->p, o->t, o->s, o->w, (mpfr_ptr)0);
}

static void ows_clear(ows *o)
{
    mpfr_clears(o->x, o->y, o->p, o->t, o->s, o->w, (mpfr_ptr)0);
}

/* MMA-Sim's alignment exponent of a nonzero finite x: floor(log2|x|), at least -126. */
static long align_exp(mpfr_srcptr x)
{
    long e = (long)mpfr_get_exp(x) - 1;
    return e < -126 ? -126 : e;
}

/* Result bits of the rounded sum s (exact): RZ to binary32, >= 2^128 -> Inf, zero -> +0. */
static uint32_t oracle_round(ows *o)
{
    mpfr_set_ui_2exp(o->w, 1, 128, MPFR_RNDN);
    if (mpfr_cmpabs(o->s, o->w) >= 0)
        return mpfr_signbit(o->s) ? 0xFF800000u : 0x7F800000u;
    const float r = mpfr_get_flt(o->s, MPFR_RNDZ);
    return r == 0.0f ? 0u : lowp_f32_bits(r); /* the zero-sign rule: +0, whatever the sign */
}

/* One fused step of n products and C under P. */
static uint32_t oracle_step(ows *o, const uint16_t *a, const uint16_t *b, size_t n,
                            uint32_t cb, const lowp_mma_params *P)
{
    const float c = lowp_f32_from_bits(cb);
    int special = !isfinite(c);
    for (size_t i = 0; i < n; i++)
        special |= !isfinite(lowp_test_bf16_value(a[i])) || !isfinite(lowp_test_bf16_value(b[i]));
    if (special) {
        mpfr_set_flt(o->s, c, MPFR_RNDN);
        for (size_t i = 0; i < n; i++) {
            mpfr_set_flt(o->x, lowp_test_bf16_value(a[i]), MPFR_RNDN);
            mpfr_set_flt(o->y, lowp_test_bf16_value(b[i]), MPFR_RNDN);
            mpfr_mul(o->p, o->x, o->y, MPFR_RNDN);
            mpfr_add(o->s, o->s, o->p, MPFR_RNDN);
        }
        if (mpfr_nan_p(o->s))
            return 0x7FFFFFFFu;
        ck_assert_msg(mpfr_inf_p(o->s), "oracle: special operands gave a finite sum");
        return mpfr_signbit(o->s) ? 0xFF800000u : 0x7F800000u;
    }
    /* Exponents. */
    long ex[65];
    int part[65];
    long E = 0;
    int have = 0;
    for (size_t i = 0; i < n; i++) {
        const float fa = lowp_test_bf16_value(a[i]), fb = lowp_test_bf16_value(b[i]);
        part[i] = 1;
        if (fa == 0.0f || fb == 0.0f) {
            if (P->zero_mode == LOWP_MMA_ZERO_SUBNORMAL) {
                /* a zero operand decomposes as 0 * 2^-126 */
                long ea = -126, eb = -126;
                if (fa != 0.0f) {
                    mpfr_set_flt(o->x, fa, MPFR_RNDN);
                    ea = align_exp(o->x);
                }
                if (fb != 0.0f) {
                    mpfr_set_flt(o->y, fb, MPFR_RNDN);
                    eb = align_exp(o->y);
                }
                ex[i] = ea + eb;
            } else if (P->zero_mode == LOWP_MMA_ZERO_FIXED) {
                ex[i] = P->e_zero;
            } else {
                part[i] = 0;
            }
        } else {
            mpfr_set_flt(o->x, fa, MPFR_RNDN);
            mpfr_set_flt(o->y, fb, MPFR_RNDN);
            ex[i] = align_exp(o->x) + align_exp(o->y);
            if (P->prod_norm) {
                mpfr_mul(o->p, o->x, o->y, MPFR_RNDN);
                mpfr_abs(o->p, o->p, MPFR_RNDN);
                mpfr_mul_2si(o->p, o->p, -ex[i], MPFR_RNDN);
                if (mpfr_cmp_ui(o->p, 2) >= 0)
                    ex[i] += 1;
            }
        }
        if (part[i] && (!have || ex[i] > E)) {
            E = ex[i];
            have = 1;
        }
    }
    long ec = 0;
    int cpart = 0;
    if (P->c_in_window) {
        cpart = 1;
        if (c != 0.0f) {
            mpfr_set_flt(o->x, c, MPFR_RNDN);
            ec = align_exp(o->x);
        } else if (P->zero_mode == LOWP_MMA_ZERO_SUBNORMAL) {
            ec = -126;
        } else if (P->zero_mode == LOWP_MMA_ZERO_FIXED) {
            ec = P->e_zero;
        } else {
            cpart = 0;
        }
        if (cpart && (!have || ec > E)) {
            E = ec;
            have = 1;
        }
    }
    /* Truncated terms, summed exactly (the zero sign is decided in oracle_round). */
    mpfr_set_zero(o->s, -1);
    for (size_t i = 0; i < n; i++) {
        mpfr_set_flt(o->x, lowp_test_bf16_value(a[i]), MPFR_RNDN);
        mpfr_set_flt(o->y, lowp_test_bf16_value(b[i]), MPFR_RNDN);
        mpfr_mul(o->p, o->x, o->y, MPFR_RNDN); /* exact: 16-bit significand */
        if (have && !mpfr_zero_p(o->p)) {
            mpfr_mul_2si(o->t, o->p, P->n_frac - E, MPFR_RNDN);
            mpfr_rint(o->t, o->t, MPFR_RNDZ);
            mpfr_mul_2si(o->p, o->t, E - P->n_frac, MPFR_RNDN);
        }
        mpfr_add(o->s, o->s, o->p, MPFR_RNDZ);
    }
    mpfr_set_flt(o->x, c, MPFR_RNDN);
    if (P->c_in_window && have && c != 0.0f) {
        mpfr_mul_2si(o->t, o->x, P->n_frac - E, MPFR_RNDN);
        mpfr_rint(o->t, o->t, MPFR_RNDZ);
        mpfr_mul_2si(o->x, o->t, E - P->n_frac, MPFR_RNDN);
    }
    mpfr_add(o->s, o->s, o->x, MPFR_RNDZ); /* exact at 640 bits */
    return oracle_round(o);
}

static uint32_t oracle(ows *o, const uint16_t *a, const uint16_t *b, size_t k, uint32_t c,
                       const lowp_mma_params *P)
{
    const size_t g = P->group <= 0 ? k : (size_t)P->group;
    for (size_t i = 0; i < k; i += g)
        c = oracle_step(o, a + i, b + i, k - i < g ? k - i : g, c, P);
    return c;
}

static uint32_t model(const uint16_t *a, const uint16_t *b, size_t k, uint32_t c,
                      const lowp_mma_params *P)
{
    return lowp_f32_bits(lowp_mma_dot_add_bf16(a, b, k, lowp_f32_from_bits(c), P));
}

static void print_case(const char *what, const uint16_t *a, const uint16_t *b, uint32_t c,
                       const lowp_mma_params *P, uint32_t got, uint32_t want)
{
    char ps[64], line[400];
    int o = snprintf(line, sizeof line, "a=");
    for (int i = 0; i < 16; i++)
        o += snprintf(line + o, sizeof line - (size_t)o, "%04x%s", a[i], i < 15 ? "," : "");
    o += snprintf(line + o, sizeof line - (size_t)o, " b=");
    for (int i = 0; i < 16; i++)
        o += snprintf(line + o, sizeof line - (size_t)o, "%04x%s", b[i], i < 15 ? "," : "");
    say("mma: FAIL %s [%s] %s c=%08x: model %08x oracle %08x\n", what,
        lowp_mma_params_str(P, ps, sizeof ps), line, c, got, want);
}

/* ---------------------------------------------------------------------------------------
 * Generators: one k16 case (a, b, c) of a kind, from a stream.
 * ------------------------------------------------------------------------------------- */

static uint16_t special_bf(uint64_t *s)
{
    static const uint16_t sp[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x0000, 0x8000, 0x0001, 0x807F};
    return sp[lowp_splitmix64(s) % 8];
}

static double approx_dot(const uint16_t *a, const uint16_t *b)
{
    double d = 0;
    for (int i = 0; i < 16; i++)
        d += (double)lowp_test_bf16_value(a[i]) * (double)lowp_test_bf16_value(b[i]);
    return d;
}

/* The C of the tiny kinds, chosen by the case's first draw r0: +-0 (a quarter of cases), a
 * binary32 subnormal (or zero) of either sign made of r0's bits (a quarter), else a value
 * drawn with its exponent in [-149, ehi] (two more draws from s). */
static uint32_t tiny_c(uint64_t *s, uint64_t r0, int ehi)
{
    switch (r0 % 4) {
    case 0:
        return (uint32_t)(r0 & 0x80000000u);
    case 1:
        return (uint32_t)((r0 >> 8) & 0x807FFFFFu);
    default:
        return lowp_test_f32_draw(s, -149, ehi);
    }
}

static void gen_case(uint64_t *s, int kind, uint16_t *a, uint16_t *b, uint32_t *c)
{
    const uint64_t r0 = lowp_splitmix64(s);
    switch (kind) {
    case 0: /* uniform finite bits, occasional specials */
        for (int i = 0; i < 16; i++) {
            a[i] = (uint16_t)(lowp_splitmix64(s) % 0x7F80u) | (uint16_t)(i & 1 ? 0x8000 : 0);
            b[i] = (uint16_t)(lowp_splitmix64(s) % 0x7F80u);
            if (lowp_splitmix64(s) % 48 == 0)
                a[i] = special_bf(s);
        }
        *c = (uint32_t)(lowp_splitmix64(s) % 0x7F800000u) | (uint32_t)(r0 & 1) << 31;
        if (r0 % 40 == 1)
            *c = r0 & 2 ? 0x7FC00000u : 0xFF800000u;
        break;
    case 1: { /* narrow exponents, both signs: cancellation and carries */
        const int e0 = lowp_test_irange(s, -30, 30);
        for (int i = 0; i < 16; i++) {
            a[i] = lowp_test_bf16_draw(s, e0 - 2, e0 + 2);
            b[i] = lowp_test_bf16_draw(s, -2, 2);
        }
        *c = r0 % 8 == 0 ? (uint32_t)(r0 & 0x80000000u) : lowp_test_f32_draw(s, e0 - 30, e0 + 8);
        break;
    }
    case 2: { /* a dominant product, the rest 5..35 binades below */
        const int e0 = lowp_test_irange(s, -40, 40), d = (int)(r0 % 16);
        for (int i = 0; i < 16; i++) {
            a[i] = i == d ? lowp_test_bf16_draw(s, e0, e0)
                          : lowp_test_bf16_draw(s, e0 - 35, e0 - 5);
            b[i] = lowp_test_bf16_draw(s, -1, 1);
        }
        *c = r0 % 4 == 0 ? (uint32_t)(r0 & 0x80000000u) : lowp_test_f32_draw(s, e0 - 35, e0 + 3);
        break;
    }
    case 3: /* C dominant, products 0..35 binades below */
        for (int i = 0; i < 16; i++) {
            a[i] = lowp_test_bf16_draw(s, -3, 3);
            b[i] = lowp_test_bf16_draw(s, -3, 3);
        }
        *c = lowp_test_f32_draw(s, 0, 35);
        break;
    case 4: { /* C cancels the products up to a few ulps */
        const int e0 = lowp_test_irange(s, -10, 10);
        for (int i = 0; i < 16; i++) {
            a[i] = lowp_test_bf16_draw(s, e0 - 2, e0 + 2);
            b[i] = lowp_test_bf16_draw(s, -2, 2);
        }
        const float d = (float)-approx_dot(a, b);
        uint32_t cb = lowp_f32_bits(d);
        if (d != 0.0f)
            cb = (uint32_t)((int64_t)cb + lowp_test_irange(s, -3, 3));
        *c = cb;
        break;
    }
    case 5: { /* pairs x*y - x*y' with y' = y or a neighbour, plus a small rest */
        const int e0 = lowp_test_irange(s, -20, 20);
        for (int i = 0; i < 16; i += 2) {
            a[i] = lowp_test_bf16_draw(s, e0 - 1, e0 + 1);
            a[i + 1] = a[i] ^ 0x8000;
            b[i] = lowp_test_bf16_draw(s, -1, 1);
            b[i + 1] = (uint16_t)(b[i] + (lowp_splitmix64(s) % 3 == 0 ? 1 : 0));
        }
        if (r0 & 1) {
            const int j = (int)((r0 >> 1) % 16);
            a[j] = lowp_test_bf16_draw(s, e0 - 30, e0 - 20);
        }
        *c = r0 % 3 == 0 ? (uint32_t)(r0 & 0x80000000u) : lowp_test_f32_draw(s, e0 - 30, e0 - 20);
        break;
    }
    case 6: /* tiny: products near the binary32 subnormal range, zeros, subnormal C */
        if (r0 & 4) { /* every product below 2^-133 (a zero term's e_zero), C = +-0 */
            for (int i = 0; i < 16; i++) {
                a[i] = lowp_test_bf16_draw(s, -82, -68);
                b[i] = lowp_test_bf16_draw(s, -82, -68);
            }
            a[r0 % 16] = (uint16_t)(r0 & 0x8000);
            *c = (uint32_t)(r0 & 0x80000000u);
            break;
        }
        for (int i = 0; i < 16; i++) {
            const uint64_t r = lowp_splitmix64(s);
            a[i] = r % 8 == 0 ? (uint16_t)((r >> 8) & 0x807F) : lowp_test_bf16_draw(s, -82, -55);
            b[i] = r % 4 == 1 ? (uint16_t)(r & 0x8000) : lowp_test_bf16_draw(s, -82, -55);
        }
        *c = tiny_c(s, r0, -118);
        break;
    case 7: /* zeros next to huge partners */
        for (int i = 0; i < 16; i++) {
            const uint64_t r = lowp_splitmix64(s);
            if (r % 2) {
                a[i] = (uint16_t)(r & 0x8000);
                b[i] = lowp_test_bf16_draw(s, -20, 127);
            } else {
                a[i] = lowp_test_bf16_draw(s, -60, 10);
                b[i] = lowp_test_bf16_draw(s, -60, 10);
            }
        }
        *c = r0 % 2 ? (uint32_t)(r0 & 0x80000000u) : lowp_test_f32_draw(s, -140, 20);
        break;
    case 8: { /* halves: a large term in one half (or C), small ones in the other */
        const int big_lo = (int)(r0 & 1), e0 = lowp_test_irange(s, -20, 20);
        for (int i = 0; i < 16; i++) {
            const int in_big = (i < 8) == big_lo;
            a[i] = in_big ? lowp_test_bf16_draw(s, e0 - 2, e0)
                          : lowp_test_bf16_draw(s, e0 - 30, e0 - 15);
            b[i] = lowp_test_bf16_draw(s, -1, 1);
            if (in_big && lowp_splitmix64(s) % 3)
                a[i] = 0;
        }
        *c = r0 % 4 == 2 ? lowp_test_f32_draw(s, e0 - 1, e0 + 1)
                         : lowp_test_f32_draw(s, e0 - 30, e0 - 10);
        break;
    }
    case 9: /* overflow range */
        for (int i = 0; i < 16; i++) {
            a[i] = lowp_test_bf16_draw(s, 55, 127);
            b[i] = lowp_test_bf16_draw(s, 55, 127);
        }
        *c = r0 % 3 == 0 ? 0u : lowp_test_f32_draw(s, 100, 127);
        break;
    default: { /* carries: equal exponents, large significands, one sign */
        const int e0 = lowp_test_irange(s, -30, 30), neg = (int)(r0 & 1);
        for (int i = 0; i < 16; i++) {
            a[i] = lowp_test_bf16_make(neg, e0, 0x60 | (unsigned)(lowp_splitmix64(s) & 0x1F));
            b[i] = lowp_test_bf16_make(0, 0, 0x60 | (unsigned)(lowp_splitmix64(s) & 0x1F));
        }
        *c = lowp_test_f32_make((int)((r0 >> 1) & 1), e0 + lowp_test_irange(s, -24, 6),
                 (uint32_t)(lowp_splitmix64(s) >> 20));
    }
    }
}

/* ---------------------------------------------------------------------------------------
 * 1. Probes
 * ------------------------------------------------------------------------------------- */

START_TEST(probes_hand_predictions)
{
    size_t n;
    const lowp_mma_probe *pr = lowp_mma_probes(&n);
    ck_assert_uint_ge(n, 40);
    ows o;
    ows_init(&o);
    const lowp_mma_params *D = &lowp_mma_sm90_bf16;
    int bad = 0, alts = 0;
    for (size_t i = 0; i < n; i++) {
        const lowp_mma_probe *p = &pr[i];
        const uint32_t om = oracle(&o, p->a, p->b, 16, p->c, D);
        const uint32_t mm = model(p->a, p->b, 16, p->c, D);
        if (om != p->expect || mm != p->expect) {
            printf("mma: FAIL probe %s: hand %08x oracle %08x model %08x\n", p->name, p->expect,
                   om, mm);
            bad++;
        }
        if (p->has_alt && p->alt == p->expect) {
            printf("mma: FAIL probe %s: its alternative predicts the same bits\n", p->name);
            bad++;
        }
        if (p->has_alt && p->alt_is_params) {
            alts++;
            const uint32_t oa = oracle(&o, p->a, p->b, 16, p->c, &p->alt_params);
            const uint32_t ma = model(p->a, p->b, 16, p->c, &p->alt_params);
            if (oa != p->alt || ma != p->alt) {
                char ps[64];
                printf("mma: FAIL probe %s alt [%s]: hand %08x oracle %08x model %08x\n",
                       p->name, lowp_mma_params_str(&p->alt_params, ps, sizeof ps), p->alt, oa,
                       ma);
                bad++;
            }
        }
    }
    ows_clear(&o);
    printf("mma: %zu probes, %d parameter alternatives: hand predictions %s\n", n, alts,
           bad ? "WRONG" : "confirmed");
    tally(n, (unsigned long long)bad);
}
END_TEST

/* The research note's two H200 measurements (4.5 (a)) and the tell-tale of n_frac 24. */
START_TEST(probes_research_note)
{
    const uint16_t a1[16] = {0x3F80, 0x3900, 0x3900, 0x3900, 0x3900};
    const uint16_t b1[16] = {0x3F80, 0x3980, 0x3980, 0x3980, 0x3980};
    const uint16_t a2[16] = {0xBF80, 0x3900};
    const uint16_t b2[16] = {0x3F80, 0x3980};
    lowp_mma_params p24 = lowp_mma_sm90_bf16;
    p24.n_frac = 24;
    ck_assert_uint_eq(model(a1, b1, 16, 0, &lowp_mma_sm90_bf16), 0x3F800001u);
    ck_assert_uint_eq(model(a2, b2, 16, 0, &lowp_mma_sm90_bf16), 0xBF7FFFFFu);
    ck_assert_uint_eq(model(a1, b1, 16, 0, &p24), 0x3F800000u);
    ck_assert_uint_eq(model(a2, b2, 16, 0, &p24), 0xBF800000u);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * 2.-3. Random cases
 * ------------------------------------------------------------------------------------- */

/* Model against oracle for ncase cases under params ps[0..np) (case i uses ps[i % np] when
 * per_case, else all of them); returns the failures. */
static unsigned long long run_random(const char *tag, uint64_t tagv, size_t ncase,
                                     const lowp_mma_params *ps, size_t np,
                                     unsigned long long *per_kind)
{
    unsigned long long bad = 0;
#pragma omp parallel reduction(+ : bad)
    {
        ows o;
        ows_init(&o);
        unsigned long long kb[NKINDS] = {0};
#pragma omp for schedule(dynamic, 256)
        for (size_t i = 0; i < ncase; i++) {
            uint64_t s = lowp_test_stream(seed, tagv, i, 0);
            uint16_t a[16] = {0}, b[16] = {0};
            uint32_t c = 0;
            const int kind = (int)(i % NKINDS);
            gen_case(&s, kind, a, b, &c);
            const lowp_mma_params *P = &ps[(i / NKINDS) % np];
            const uint32_t want = oracle(&o, a, b, 16, c, P);
            const uint32_t got = model(a, b, 16, c, P);
            if (got != want) {
                bad++;
                kb[kind]++;
                print_case(tag, a, b, c, P, got, want);
            }
        }
#pragma omp critical
        for (int k = 0; k < NKINDS; k++)
            per_kind[k] += kb[k];
        ows_clear(&o);
    }
    return bad;
}

START_TEST(random_default_params)
{
    unsigned long long pk[NKINDS] = {0};
    const double t0 = lowp_test_now();
    const unsigned long long bad =
        run_random("random-default", 1, RANDOM_DEFAULT, &lowp_mma_sm90_bf16, 1, pk);
    printf("mma: %d random cases, lowp_mma_sm90_bf16 vs oracle: %llu mismatches (%.1f s)\n",
           RANDOM_DEFAULT, bad, lowp_test_now() - t0);
    for (int k = 0; k < NKINDS; k++)
        if (pk[k])
            printf("mma:   kind %s: %llu\n", kind_name[k], pk[k]);
    tally(RANDOM_DEFAULT, bad);
}
END_TEST

START_TEST(random_all_candidates)
{
    lowp_mma_params cand[NCAND_MAX];
    const size_t nc = lowp_mma_candidates(cand);
    ck_assert_uint_eq(nc, LOWP_MMA_N_CANDIDATES);
    ck_assert_uint_eq(nc, 200);
    /* 200 different sets (as their descriptions say), the record among them once */
    int have_default = 0;
    char pd[64];
    lowp_mma_params_str(&lowp_mma_sm90_bf16, pd, sizeof pd);
    for (size_t i = 0; i < nc; i++) {
        char pi[64], pj[64];
        lowp_mma_params_str(&cand[i], pi, sizeof pi);
        have_default += strcmp(pi, pd) == 0;
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(pi, lowp_mma_params_str(&cand[j], pj, sizeof pj)) != 0,
                          "candidates %zu and %zu are both %s", j, i, pi);
    }
    ck_assert_int_eq(have_default, 1);
    unsigned long long pk[NKINDS] = {0};
    const size_t ncase = nc * RANDOM_PER_CAND;
    const double t0 = lowp_test_now();
    const unsigned long long bad = run_random("random-candidates", 2, ncase, cand, nc, pk);
    printf("mma: %zu random cases over %zu candidate parameter sets vs oracle: %llu "
           "mismatches (%.1f s)\n",
           ncase, nc, bad, lowp_test_now() - t0);
    tally(ncase, bad);
}
END_TEST

/* Each alternative parameter changes some results of each tested generator family, and the
 * batch API agrees with the single one on every candidate. */
START_TEST(sensitivity_and_batch)
{
    lowp_mma_params cand[NCAND_MAX];
    const size_t nc = lowp_mma_candidates(cand);
    const lowp_mma_params D = lowp_mma_sm90_bf16;
    lowp_mma_params alt[7];
    const char *alt_name[7] = {"n_frac 24", "n_frac 26", "group 8", "C outside window",
                               "zero rule arithmetic.py", "zeros skipped", "prod_norm"};
    for (int i = 0; i < 7; i++)
        alt[i] = D;
    alt[0].n_frac = 24;
    alt[1].n_frac = 26;
    alt[2].group = 8;
    alt[3].c_in_window = 0;
    alt[4].zero_mode = LOWP_MMA_ZERO_SUBNORMAL;
    alt[5].zero_mode = LOWP_MMA_ZERO_SKIP;
    alt[6].prod_norm = 1;
    const size_t ncase = 200000;
    unsigned long long differ[7] = {0}, batch_bad = 0;
#pragma omp parallel reduction(+ : batch_bad)
    {
        unsigned long long d[7] = {0};
        float out[NCAND_MAX];
#pragma omp for schedule(dynamic, 1024)
        for (size_t i = 0; i < ncase; i++) {
            uint64_t s = lowp_test_stream(seed, 3, i, 0);
            uint16_t a[16] = {0}, b[16] = {0};
            uint32_t c = 0;
            gen_case(&s, (int)(i % NKINDS), a, b, &c);
            const uint32_t base = model(a, b, 16, c, &D);
            for (int j = 0; j < 7; j++)
                d[j] += model(a, b, 16, c, &alt[j]) != base;
            if (i % 16 == 0) {
                lowp_mma_dot_add_bf16_multi(a, b, 16, lowp_f32_from_bits(c), cand, nc, out);
                for (size_t j = 0; j < nc; j++)
                    if (lowp_f32_bits(out[j]) != model(a, b, 16, c, &cand[j])) {
                        batch_bad++;
                        print_case("batch", a, b, c, &cand[j], lowp_f32_bits(out[j]),
                                   model(a, b, 16, c, &cand[j]));
                    }
            }
        }
#pragma omp critical
        for (int j = 0; j < 7; j++)
            differ[j] += d[j];
    }
    for (int j = 0; j < 7; j++) {
        printf("mma: %s differs from the default on %llu of %zu random cases\n", alt_name[j],
               differ[j], ncase);
        ck_assert_msg(differ[j] >= 20, "the generators do not exercise %s", alt_name[j]);
    }
    total_bad += batch_bad;
    ck_assert_uint_eq(batch_bad, 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * 4. API
 * ------------------------------------------------------------------------------------- */

START_TEST(api_edges)
{
    const lowp_mma_params *D = &lowp_mma_sm90_bf16;
    uint16_t a[32] = {0}, b[32] = {0};
    /* k = 0 returns C unchanged, payload included. */
    ck_assert_uint_eq(
        lowp_f32_bits(lowp_mma_dot_add_bf16(a, b, 0, lowp_f32_from_bits(0x7FC00123u), D)),
        0x7FC00123u);
    /* Bad parameters -> canonical NaN. */
    lowp_mma_params bp = *D;
    bp.n_frac = LOWP_MMA_MAX_NFRAC + 1;
    for (int i = 0; i < 16; i++)
        a[i] = b[i] = 0x3F80;
    ck_assert_uint_eq(lowp_f32_bits(lowp_mma_dot_add_bf16(a, b, 16, 0.0f, &bp)), 0x7FFFFFFFu);
    bp = *D;
    bp.zero_mode = 7;
    ck_assert_uint_eq(lowp_f32_bits(lowp_mma_dot_add_bf16(a, b, 16, 0.0f, &bp)), 0x7FFFFFFFu);
    /* k = 32: two chained k16 steps, in k order, equal to two calls; also vs the oracle. */
    ows o;
    ows_init(&o);
    for (int t = 0; t < 2000; t++) {
        uint64_t s = lowp_test_stream(seed, 4, (uint64_t)t, 0);
        uint32_t c = 0, c2 = 0;
        gen_case(&s, t % NKINDS, a, b, &c);
        gen_case(&s, (t + 3) % NKINDS, a + 16, b + 16, &c2);
        const uint32_t one = model(a, b, 32, c, D);
        const uint32_t two = model(a + 16, b + 16, 16, model(a, b, 16, c, D), D);
        ck_assert_uint_eq(one, two);
        ck_assert_uint_eq(one, oracle(&o, a, b, 32, c, D));
    }
    ows_clear(&o);
    char buf[64];
    ck_assert_str_eq(lowp_mma_params_str(D, buf, sizeof buf), "g16 f25 cin1 z-133 pn0");
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * 5. Fast path against the general path
 * ------------------------------------------------------------------------------------- */

static const char *fast_kind_name[NFKINDS - NKINDS] = {
    "sweep-a", "sweep-b", "bits", "gauss", "cancel", "overflow", "underflow", "wide",
    "zeros-sub"};

/* The general path for lowp_mma_sm90_bf16: the batch API never takes the fast path. */
static uint32_t general(const uint16_t *a, const uint16_t *b, size_t k, uint32_t c)
{
    float out;
    lowp_mma_dot_add_bf16_multi(a, b, k, lowp_f32_from_bits(c), &lowp_mma_sm90_bf16, 1, &out);
    return lowp_f32_bits(out);
}

/* Any bf16 pattern, NaN and Inf 1 in 16 times as often as uniform bits give them. */
static uint16_t bits_bf(uint64_t *s)
{
    const uint64_t r = lowp_splitmix64(s);
    uint16_t u = (uint16_t)r;
    if ((u & 0x7F80u) == 0x7F80u && (r >> 16) % 16 != 0)
        u ^= 0x4000u; /* exponent field 0xFF -> 0xBF: finite */
    return u;
}

static double gauss(uint64_t *s)
{
    const double u1 = (double)((lowp_splitmix64(s) >> 11) + 1) * 0x1p-53;
    const double u2 = (double)(lowp_splitmix64(s) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* A C of a kind hard for the fast path: zeros, subnormals, extremes, specials, any bits. */
static uint32_t pick_c(uint64_t *s, uint32_t c)
{
    const uint64_t r = lowp_splitmix64(s);
    const uint32_t sg = (uint32_t)(r >> 63) << 31;
    switch (r % 11) {
    case 0:
        return 0u;
    case 1:
        return 0x80000000u;
    case 2:
        return (uint32_t)(r >> 8) & 0x807FFFFFu; /* subnormal */
    case 3:
        return sg | 0x00800000u; /* FLT_MIN */
    case 4:
        return sg | 0x7F7FFFFFu; /* FLT_MAX */
    case 5:
        return sg | 0x7F800000u;
    case 6:
        return sg | 0x7F800000u | (uint32_t)(1 + (r >> 8) % 0x7FFFFF); /* NaN */
    case 7:
        return (uint32_t)(r >> 16);
    case 8:
        return c ^ 0x80000000u;
    case 9:
        return lowp_test_f32_make((int)(r >> 62) & 1, lowp_test_irange(s, -149, 127),
                                  (uint32_t)(r >> 20));
    default:
        return sg | (uint32_t)(r >> 8) % 0x40u; /* the smallest subnormals */
    }
}

/* One block of 16 of kind `kind` (0..NFKINDS); idx numbers the cases of the kind. */
static void gen_fast_block(uint64_t *s, int kind, uint64_t idx, uint16_t *a, uint16_t *b,
                           uint32_t *c)
{
    if (kind < NKINDS) {
        gen_case(s, kind, a, b, c);
        if (lowp_splitmix64(s) % 8 == 0)
            *c = pick_c(s, *c);
        return;
    }
    const uint64_t r0 = lowp_splitmix64(s);
    const int sg0 = (int)(r0 & 1);
    switch (kind - NKINDS) {
    case 0:
    case 1: { /* every pattern in turn (rotated over the positions); the partner any bits
               * or scaled to a product exponent in -150..126 (mostly finite sums) */
        uint16_t *sw = kind == NKINDS ? a : b, *ot = kind == NKINDS ? b : a;
        const unsigned base = (unsigned)(idx & 4095) * 16, rot = (unsigned)(idx >> 12) & 15;
        for (unsigned j = 0; j < 16; j++) {
            const unsigned p = (unsigned)(j + rot) & 15, x = (base + j) >> 7 & 0xFF;
            sw[p] = (uint16_t)(base + j);
            ot[p] = r0 % 8 == 0   ? (uint16_t)lowp_splitmix64(s)
                    : r0 % 8 == 1 ? bits_bf(s)
                             : lowp_test_bf16_make((int)(lowp_splitmix64(s) & 1),
                                    lowp_test_irange(s, -150, 126) - (x ? (int)x - 127 : -126),
                                    (unsigned)lowp_splitmix64(s));
        }
        *c = (uint32_t)(lowp_splitmix64(s) >> 32);
        break;
    }
    case 2: /* random bits, specials rare; half the time exponents in -63..64 */
        for (int i = 0; i < 16; i++) {
            a[i] = bits_bf(s);
            b[i] = bits_bf(s);
            if (r0 & 2) {
                a[i] = (uint16_t)((a[i] & 0x807Fu) | (64u + (a[i] >> 7 & 0x7Fu)) << 7);
                b[i] = (uint16_t)((b[i] & 0x807Fu) | (64u + (b[i] >> 7 & 0x7Fu)) << 7);
            }
        }
        *c = (uint32_t)(lowp_splitmix64(s) >> 32);
        if ((*c & 0x7F800000u) == 0x7F800000u)
            *c ^= 0x40000000u;
        break;
    case 3: { /* decode: Gaussian q, k (or p, v), C a previous dot product */
        const double sk = ldexp(1.0, lowp_test_irange(s, -8, 2));
        for (int i = 0; i < 16; i++) {
            a[i] = lowp_bf16_from_f32((float)gauss(s));
            b[i] = lowp_bf16_from_f32((float)(sk * gauss(s)));
        }
        if (r0 % 4 == 0) /* P.V: probabilities in [0, 1], some zero */
            for (int i = 0; i < 16; i++)
                a[i] = lowp_splitmix64(s) % 4
                           ? lowp_bf16_from_f32((float)exp(-fabs(4 * gauss(s))))
                           : 0;
        *c = r0 % 5 == 0 ? 0u : lowp_f32_bits((float)(sk * 4 * gauss(s)));
        break;
    }
    case 4: { /* massive cancellation: +x*y, -x*y' (y' = y or a neighbour), C ~ -sum */
        const int e0 = lowp_test_irange(s, -60, 60);
        for (int i = 0; i < 16; i += 2) {
            a[i] = lowp_test_bf16_draw(s, e0 - 3, e0 + 3);
            a[i + 1] = a[i] ^ 0x8000;
            b[i] = lowp_test_bf16_draw(s, -3, 3);
            b[i + 1] = (uint16_t)(b[i] + (int)(lowp_splitmix64(s) % 3) - 1);
        }
        if (r0 & 2)
            a[(r0 >> 2) % 16] = lowp_test_bf16_draw(s, e0 - 40, e0 - 5);
        switch ((r0 >> 8) % 3) {
        case 0:
            *c = (uint32_t)(r0 & 0x80000000u);
            break;
        case 1: {
            const float d = (float)-approx_dot(a, b);
            *c = d == 0.0f
                     ? 0u
                     : (uint32_t)((int64_t)lowp_f32_bits(d) + lowp_test_irange(s, -2, 2));
            break;
        }
        default:
            *c = lowp_test_f32_draw(s, e0 - 60, e0 - 15);
        }
        break;
    }
    case 5: { /* sums near 2^128: a few products at 2^122..2^127, C up to FLT_MAX */
        const int n = lowp_test_irange(s, 1, 6);
        for (int i = 0; i < 16; i++) {
            if (i < n) {
                const int ea = lowp_test_irange(s, 0, 127), ep = lowp_test_irange(s, 122, 127);
                const int sg = r0 & 2 ? sg0 : (int)(lowp_splitmix64(s) & 1);
                a[i] = lowp_test_bf16_make(sg, ea, (unsigned)lowp_splitmix64(s));
                b[i] = lowp_test_bf16_make(0, ep - ea, (unsigned)lowp_splitmix64(s));
            } else {
                a[i] = r0 & 4 ? lowp_test_bf16_draw(s, -20, 60) : 0;
                b[i] = lowp_test_bf16_draw(s, -20, 60);
            }
        }
        *c = r0 % 3 == 0 ? (uint32_t)(r0 & 0x80000000u)
                         : lowp_test_f32_make(r0 & 8 ? sg0 : !sg0, lowp_test_irange(s, 120, 127),
                               (uint32_t)lowp_splitmix64(s) | (r0 & 16 ? 0x7FFF00u : 0));
        break;
    }
    case 6: { /* near binary32 underflow: products 2^-175..2^-115, C tiny; a third of the
               * time all below 2^-133 (a zero C's exponent), a third near it; 1 in 6 a
               * ladder (the probes ezero-*): one product on the 2^-149 grid below 2^-133,
               * the others below 2^-149, C = +-0: the window's floor decides the result */
        const int ladder = r0 % 6 == 0;
        const int ehi = ladder ? -150 : r0 % 3 == 0 ? -134 : r0 % 3 == 1 ? -128 : -115;
        for (int i = 0; i < 16; i++) {
            const int ea = lowp_test_irange(s, -80, -35),
                      ep = lowp_test_irange(s, ehi - (ladder ? 16 : 40), ehi);
            a[i] = lowp_test_bf16_make((int)(lowp_splitmix64(s) & 1), ea,
                                       (unsigned)lowp_splitmix64(s));
            b[i] = lowp_test_bf16_make(0, ep - ea, (unsigned)lowp_splitmix64(s));
            if (lowp_splitmix64(s) % 6 == 0)
                a[i] &= 0x8000;
        }
        *c = tiny_c(s, r0, -110);
        if (ladder) { /* a[1] * b[1], a[2] * b[2] < 0, the others below 2^-165 or zero
                       * (a zero product would hold E at -133 without C) */
            a[0] = lowp_test_bf16_make(0, -70, (unsigned)(r0 >> 16));
            b[0] = lowp_test_bf16_make(0, lowp_test_irange(s, -72, -66), 0);
            a[1] |= 0x8000;
            a[2] |= 0x8000;
            for (int i = 3; i < 16; i++) {
                a[i] = r0 & 0x100 ? (uint16_t)(a[i] & 0x8000) : lowp_test_bf16_make(0, -100, 0x7F);
                b[i] = lowp_test_bf16_make(0, lowp_test_irange(s, -100, -67),
                                           (unsigned)lowp_splitmix64(s));
            }
            *c = (uint32_t)(r0 & 0x80000000u);
        }
        break;
    }
    case 7: /* operand exponents over the whole range (bf16 subnormals included), product
             * exponents over -260..112 (most of the range without overflowing) */
        for (int i = 0; i < 16; i++) {
            const int ep = lowp_test_irange(s, -260, 112);
            const int ea = lowp_test_irange(s, ep - 127 > -133 ? ep - 127 : -133,
                                            ep + 133 < 127 ? ep + 133 : 127);
            const int eb = ep - ea;
            a[i] = lowp_test_bf16_make((int)(lowp_splitmix64(s) & 1), ea,
                                       (unsigned)lowp_splitmix64(s));
            b[i] = lowp_test_bf16_make((int)(lowp_splitmix64(s) & 1), eb,
                                       (unsigned)lowp_splitmix64(s));
        }
        *c = lowp_test_f32_make(sg0, lowp_test_irange(s, -149, 127), (uint32_t)(r0 >> 20));
        break;
    default: /* zeros of both signs and subnormals among moderate values */
        for (int i = 0; i < 16; i++) {
            uint16_t *x[2] = {&a[i], &b[i]};
            for (int j = 0; j < 2; j++) {
                const uint64_t r = lowp_splitmix64(s);
                *x[j] = r % 4 == 0   ? (uint16_t)(r & 0x8000)
                        : r % 4 == 1 ? (uint16_t)((r & 0x8000) | (1 + (r >> 16) % 127))
                                     : lowp_test_bf16_draw(s, -30, 30);
            }
        }
        *c = r0 % 3 == 0 ? (uint32_t)(r0 & 0x80000000u)
             : r0 % 3 == 1 ? (uint32_t)(r0 >> 8) & 0x807FFFFFu
                           : lowp_test_f32_draw(s, -140, 30);
    }
    if (lowp_splitmix64(s) % 4 == 0)
        *c = pick_c(s, *c);
}

/* Case i: k (16 mostly, 32, or 1..64) and the operands; returns the kind of block 0. */
static int gen_fast(uint64_t i, uint16_t *a, uint16_t *b, uint32_t *c, size_t *k)
{
    uint64_t s = lowp_test_stream(seed, 5, i, 0);
    const int kind = (int)(i % NFKINDS);
    const uint64_t idx = i / NFKINDS;
    const uint64_t r = lowp_splitmix64(&s);
    *k = r % 10 < 8 ? 16 : r % 10 == 8 ? 32 : 1 + (size_t)((r >> 8) % 64);
    for (size_t blk = 0; blk * 16 < *k; blk++) {
        uint32_t cc;
        gen_fast_block(&s, (kind + 7 * (int)blk) % NFKINDS, idx, a + 16 * blk, b + 16 * blk,
                       &cc);
        if (blk == 0)
            *c = cc;
    }
    return kind;
}

enum { R_NAN, R_PINF, R_NINF, R_ZERO, R_SUB, R_NORM, R_BIG, R_NCLASS };
static const char *rclass_name[R_NCLASS] = {"NaN", "+Inf", "-Inf", "+0", "subnormal",
                                            "normal", ">= 2^127"};

static int rclass(uint32_t u)
{
    if ((u & 0x7F800000u) == 0x7F800000u)
        return u & 0x7FFFFFu ? R_NAN : u >> 31 ? R_NINF : R_PINF;
    if ((u & 0x7FFFFFFFu) == 0)
        return R_ZERO;
    if ((u & 0x7F800000u) == 0)
        return R_SUB;
    return (u & 0x7F800000u) == 0x7F000000u ? R_BIG : R_NORM;
}

START_TEST(fast_vs_general)
{
    static unsigned char seen_a[65536], seen_b[65536];
    memset(seen_a, 0, sizeof seen_a);
    memset(seen_b, 0, sizeof seen_b);
    unsigned long long bad = 0, cls[R_NCLASS] = {0}, kbad[NFKINDS] = {0};
    const double t0 = lowp_test_now();
#pragma omp parallel reduction(+ : bad)
    {
        unsigned long long cl[R_NCLASS] = {0}, kb[NFKINDS] = {0};
        unsigned char *sa = calloc(65536, 1), *sb = calloc(65536, 1);
        ck_assert_ptr_nonnull(sa);
        ck_assert_ptr_nonnull(sb);
#pragma omp for schedule(dynamic, 4096)
        for (size_t i = 0; i < FAST_CASES; i++) {
            uint16_t a[64], b[64];
            uint32_t c;
            size_t k;
            const int kind = gen_fast(i, a, b, &c, &k);
            for (size_t j = 0; j < k; j++) {
                sa[a[j]] = 1;
                sb[b[j]] = 1;
            }
            const uint32_t got = model(a, b, k, c, &lowp_mma_sm90_bf16);
            const uint32_t want = general(a, b, k, c);
            cl[rclass(want)]++;
            if (got != want) {
                bad++;
                kb[kind]++;
                char line[1200];
                int o = 0;
                for (size_t j = 0; j < k; j++)
                    o += snprintf(line + o, sizeof line - (size_t)o, "%04x*%04x%s", a[j], b[j],
                                  j + 1 < k ? "," : "");
                say("mma: FAIL fast path, case %zu (%s, k %zu): c=%08x %s: fast %08x general "
                    "%08x\n",
                    i, kind < NKINDS ? kind_name[kind] : fast_kind_name[kind - NKINDS], k, c,
                    line, got, want);
            }
        }
#pragma omp critical
        {
            for (int j = 0; j < R_NCLASS; j++)
                cls[j] += cl[j];
            for (int j = 0; j < NFKINDS; j++)
                kbad[j] += kb[j];
            for (size_t j = 0; j < 65536; j++) {
                seen_a[j] |= sa[j];
                seen_b[j] |= sb[j];
            }
        }
        free(sa);
        free(sb);
    }
    size_t miss_a = 0, miss_b = 0;
    for (size_t j = 0; j < 65536; j++) {
        miss_a += !seen_a[j];
        miss_b += !seen_b[j];
    }
    printf("mma: %d random cases, fast path vs general path: %llu mismatches (%.1f s)\n",
           FAST_CASES, bad, lowp_test_now() - t0);
    for (int j = 0; j < NFKINDS; j++)
        if (kbad[j])
            printf("mma:   kind %s: %llu\n",
                   j < NKINDS ? kind_name[j] : fast_kind_name[j - NKINDS], kbad[j]);
    printf("mma:   results:");
    for (int j = 0; j < R_NCLASS; j++)
        printf(" %s %llu%s", rclass_name[j], cls[j], j + 1 < R_NCLASS ? "," : "\n");
    printf("mma:   bf16 patterns never seen: %zu in a, %zu in b\n", miss_a, miss_b);
    tally(FAST_CASES, bad);
    ck_assert_uint_eq(miss_a, 0);
    ck_assert_uint_eq(miss_b, 0);
    for (int j = 0; j < R_NCLASS; j++)
        ck_assert_msg(cls[j] >= 1000, "the fast-path cases reach %s only %llu times",
                      rclass_name[j], cls[j]);
}
END_TEST

/* ns per call, fast and general path, k = 16, Gaussian decode data, C the previous result
 * (chains of 8 steps, as Q.K^T over a head of 128); informative, not checked. */
START_TEST(fast_timing)
{
    enum { NV = 1024, CALLS = 2000000 };
    static uint16_t q[NV][16], kv[NV][16];
    uint64_t s = lowp_test_stream(seed, 6, 0, 0);
    for (int i = 0; i < NV; i++)
        for (int j = 0; j < 16; j++) {
            q[i][j] = lowp_bf16_from_f32((float)gauss(&s));
            kv[i][j] = lowp_bf16_from_f32((float)(0.3 * gauss(&s)));
        }
    double ns[2];
    uint32_t h[2];
    for (int path = 0; path < 2; path++) {
        uint32_t acc = 0, hh = 0;
        const double t0 = lowp_test_now();
        for (int n = 0; n < CALLS; n++) {
            if (n % 8 == 0) {
                hh = hh * 31u + acc;
                acc = 0;
            }
            const uint16_t *x = q[n % NV], *y = kv[(n * 7 + n / NV) % NV];
            acc = path ? general(x, y, 16, acc) : model(x, y, 16, acc, &lowp_mma_sm90_bf16);
        }
        ns[path] = 1e9 * (lowp_test_now() - t0) / CALLS;
        h[path] = hh * 31u + acc;
    }
    printf("mma: k = 16 decode data, one thread: fast path %.1f ns/call, general path %.1f "
           "ns/call (x%.1f)\n",
           ns[0], ns[1], ns[1] / ns[0]);
    ck_assert_uint_eq(h[0], h[1]);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */

static Suite *mma_suite(void)
{
    Suite *s = suite_create("mma");
    lowp_test_tcase(s, "mma", 1800,
                    LOWP_TESTS(probes_hand_predictions, probes_research_note, api_edges,
                               sensitivity_and_batch, random_default_params, random_all_candidates,
                               fast_vs_general, fast_timing));
    return s;
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        fprintf(stderr, "usage: %s\n", argv[0]);
        return 2;
    }
    seed = lowp_test_seed("mma", seed);
    char ps[64];
    printf("mma: seed 0x%016" PRIx64 " (LOWP_SEED overrides), %d threads; default %s\n", seed,
           omp_get_max_threads(), lowp_mma_params_str(&lowp_mma_sm90_bf16, ps, sizeof ps));
    fflush(stdout);
    const double t0 = lowp_test_now();
    const int failed = lowp_test_run(mma_suite(), LOWP_TEST_NOFORK, NULL);
    printf("mma: %llu cases checked, %llu failures, %.1f s\n", total_checked, total_bad,
           lowp_test_now() - t0);
    return (failed || total_bad) ? EXIT_FAILURE : EXIT_SUCCESS;
}
