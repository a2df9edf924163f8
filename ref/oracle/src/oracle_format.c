/* ref/oracle/src/oracle_format.c: the MPFR model of every lowp codec (see lowp/oracle.h).
 *
 * Models ref/profiles.md from the text, not from ref/codec/src/format.c: the format definitions,
 * the table of supported combinations and the special-value rules are data below; finite
 * values are rounded by MPFR (precision mbits+1, the format's emin/emax, mpfr_subnormalize),
 * ties-away by an exact integer rounding, E8M0 by rounding |x| to a power of two. A code is
 * then found by looking the rounded value up among the values lowp_oracle_decode gives to
 * all codes, so no field packing is shared with the fast codecs.
 *
 * Invariants:
 *   - every MPFR result read back with mpfr_get_d is exact (at most 24 significant bits and
 *     an exponent inside binary64's range), so comparisons on doubles are exact;
 *   - each entry point leaves the calling thread's MPFR exponent range as it found it;
 *   - the value -> code table of a format is built once, then only read.
 */
#include "lowp/bits.h"
#include "lowp/oracle.h"

#include <math.h>
#include <mpfr.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Format definitions (the oracle's own copy; tests compare it with format.h's accessors).
 * ------------------------------------------------------------------------------------- */

typedef enum {
    NAN_NONE,     /* E2M1: no NaN, no Inf */
    NAN_IEEE,     /* exponent all ones: zero fraction Inf, nonzero fraction NaN */
    NAN_ALL_ONES, /* E4M3 "fn": only S.1111.111 is NaN; the top exponent is otherwise finite */
    NAN_E8M0      /* unsigned powers of two, 0xFF NaN */
} nan_kind;

typedef struct {
    unsigned bits;       /* code width */
    int ebits, mbits, bias;
    nan_kind nan;
    double max_finite;   /* largest finite value, stated here rather than derived */
    uint16_t ovf_nan[2]; /* overflow code without saturation where no Inf exists, [sign] */
} fmt_def;

static const fmt_def FMT[LOWP_FORMAT_COUNT] = {
    [LOWP_E2M1] = {4, 2, 1, 1, NAN_NONE, 0x1.8p2, {0, 0}},
    [LOWP_E4M3] = {8, 4, 3, 7, NAN_ALL_ONES, 0x1.cp8, {0x7F, 0xFF}},
    [LOWP_E5M2] = {8, 5, 2, 15, NAN_IEEE, 0x1.cp15, {0, 0}},
    [LOWP_E8M0] = {8, 8, 0, 127, NAN_E8M0, 0x1p127, {0xFF, 0xFF}},
    [LOWP_BF16] = {16, 8, 7, 127, NAN_IEEE, 0x1.fep127, {0, 0}},
    [LOWP_F16] = {16, 5, 10, 15, NAN_IEEE, 0x1.ffcp15, {0, 0}},
};

/* binary32, the intermediate format of torch and ml_dtypes for binary64 input. */
static const fmt_def BINARY32 = {32, 8, 23, 127, NAN_IEEE, 0x1.fffffep127, {0, 0}};

static int has_inf(const fmt_def *d)
{
    return d->nan == NAN_IEEE;
}

/* MPFR's exponent range for a format: MPFR writes x = 0.1b...b * 2^E, so the smallest
 * subnormal 2^(1-bias-mbits) has E = 2-bias-mbits (= emin), and the largest exponent field
 * holding finite values, emax_field, gives E = emax_field-bias+1 (= emax). E4M3 and E2M1 use
 * their top exponent field for finite values; E4M3's 480 = 0.1111 * 2^9 is then in MPFR's
 * range, which is why overflow is decided against max_finite and not by MPFR. */
static mpfr_exp_t fmt_emin(const fmt_def *d)
{
    return 2 - d->bias - d->mbits;
}

static mpfr_exp_t fmt_emax(const fmt_def *d)
{
    int top = (1 << d->ebits) - 1;
    return (has_inf(d) ? top - 1 : top) - d->bias + 1;
}

/* ---------------------------------------------------------------------------------------
 * Profiles: ref/profiles.md as data.
 * ------------------------------------------------------------------------------------- */

#define M_RN (1u << LOWP_RN)
#define M_RZ (1u << LOWP_RZ)
#define M_RU (1u << LOWP_RU)
#define M_RD (1u << LOWP_RD)
#define M_RNA (1u << LOWP_RNA)
#define M_DIRECTED4 (M_RN | M_RZ | M_RU | M_RD)
#define M_ALL (M_RN | M_RZ | M_RU | M_RD | M_RNA)

typedef enum {
    SAT_NONE,        /* no conversion at all */
    SAT_ONLY_ON,     /* "saturating only" */
    SAT_ONLY_OFF,    /* "nosat only" */
    SAT_BOTH_DEF_ON, /* "sat (default) or nosat" */
    SAT_BOTH_DEF_OFF /* "nosat (default) or sat" */
} sat_rule;

typedef enum {
    NAN32_FIXED,  /* nan[sign] */
    NAN32_PAYLOAD, /* numpy float16: s | 0x7C00 | (fraction >> 13), 0x7C00 bumped to 0x7C01 */
    NAN32_PAYLOAD_QUIET /* torch f16 (F16C): s | 0x7E00 | (fraction >> 13) */
} nan32_rule;

typedef enum {
    NAN64_AS_F32,   /* the binary32 rule with the double's sign (ocp) */
    NAN64_FIXED,    /* nan64[sign] (cuda) */
    NAN64_FIXED_TOP2, /* nan64[sign] | top two fraction bits of the double (cuda E5M2) */
    NAN64_VIA_F32,  /* (float)x first, then the binary32 rule (torch, ml_dtypes) */
    NAN64_PAYLOAD   /* numpy float16 from a double: s | 0x7C00 | (fraction >> 42), 0x7C00 -> 0x7C01 */
} nan64_rule;

typedef struct {
    unsigned modes;     /* bit r: rounding mode r exists */
    sat_rule sat;
    nan32_rule nan32;
    uint16_t nan[2];    /* binary32 NaN input, [sign] */
    nan64_rule nan64;
    uint16_t nan64c[2]; /* binary64 NaN input for NAN64_FIXED*, [sign] */
    int f64_via_f32;    /* binary64 input is rounded to binary32 (RNE) first */
    /* E8M0 only */
    uint16_t e8m0_zero; /* code for +-0 */
    int e8m0_neg_nan;   /* negative input (incl. -0, -Inf) gives 0xFF; else |x| is used */
    int e8m0_sub_up;    /* rn: binary32 subnormal in (2^-127, 2^-126) goes to 2^-126 */
} prof_def;

#define P_NONE {0, SAT_NONE, NAN32_FIXED, {0, 0}, NAN64_AS_F32, {0, 0}, 0, 0, 0, 0}

static const prof_def PROF[LOWP_FORMAT_COUNT][LOWP_PROFILE_COUNT] = {
    [LOWP_E2M1] = {
        /* cuda: NaN -> +6 whatever its sign; the double entry point is the same function */
        [LOWP_PROFILE_CUDA] = {M_RN | M_RZ, SAT_ONLY_ON, NAN32_FIXED, {0x7, 0x7},
                               NAN64_FIXED, {0x7, 0x7}, 0, 0, 0, 0},
        /* PyTorch 2.11 has no float -> float4_e2m1fn_x2 cast */
        [LOWP_PROFILE_TORCH] = P_NONE,
        /* ml_dtypes: quiet_NaN() is -0, and -NaN is its negation +0 */
        [LOWP_PROFILE_ML_DTYPES] = {M_RN, SAT_ONLY_ON, NAN32_FIXED, {0x8, 0x0},
                                    NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_OCP] = {M_ALL, SAT_ONLY_ON, NAN32_FIXED, {0x7, 0xF},
                              NAN64_AS_F32, {0, 0}, 0, 0, 0, 0},
    },
    [LOWP_E4M3] = {
        /* cuda: the float entry point canonicalises NaN to 0x7FFFFFFF (sign lost); the
         * double entry point ORs the sign back in */
        [LOWP_PROFILE_CUDA] = {M_RN, SAT_BOTH_DEF_ON, NAN32_FIXED, {0x7F, 0x7F},
                               NAN64_FIXED, {0x7F, 0xFF}, 0, 0, 0, 0},
        [LOWP_PROFILE_TORCH] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0x7F, 0xFF},
                                NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_ML_DTYPES] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0x7F, 0xFF},
                                    NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_OCP] = {M_ALL, SAT_BOTH_DEF_ON, NAN32_FIXED, {0x7F, 0xFF},
                              NAN64_AS_F32, {0, 0}, 0, 0, 0, 0},
    },
    [LOWP_E5M2] = {
        [LOWP_PROFILE_CUDA] = {M_RN, SAT_BOTH_DEF_ON, NAN32_FIXED, {0x7F, 0x7F},
                               NAN64_FIXED_TOP2, {0x7E, 0xFE}, 0, 0, 0, 0},
        [LOWP_PROFILE_TORCH] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0x7F, 0xFF},
                                NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_ML_DTYPES] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0x7E, 0xFE},
                                    NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_OCP] = {M_ALL, SAT_BOTH_DEF_ON, NAN32_FIXED, {0x7F, 0xFF},
                              NAN64_AS_F32, {0, 0}, 0, 0, 0, 0},
    },
    [LOWP_E8M0] = {
        /* cuda has no round-to-nearest E8M0; its ctor default is ru + SATFINITE */
        [LOWP_PROFILE_CUDA] = {M_RZ | M_RU, SAT_BOTH_DEF_ON, NAN32_FIXED, {0xFF, 0xFF},
                               NAN64_FIXED, {0xFF, 0xFF}, 0, 0x00, 0, 0},
        [LOWP_PROFILE_TORCH] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0xFF, 0xFF},
                                NAN64_VIA_F32, {0, 0}, 1, 0x00, 0, 1},
        [LOWP_PROFILE_ML_DTYPES] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0xFF, 0xFF},
                                    NAN64_VIA_F32, {0, 0}, 1, 0xFF, 1, 1},
        [LOWP_PROFILE_OCP] = {M_ALL, SAT_BOTH_DEF_ON, NAN32_FIXED, {0xFF, 0xFF},
                              NAN64_AS_F32, {0, 0}, 0, 0xFF, 1, 0},
    },
    [LOWP_BF16] = {
        [LOWP_PROFILE_CUDA] = {M_DIRECTED4, SAT_ONLY_OFF, NAN32_FIXED, {0x7FFF, 0x7FFF},
                               NAN64_FIXED, {0x7FFF, 0x7FFF}, 0, 0, 0, 0},
        /* torch 2.11 vectorized CPU kernels: all-ones for any NaN */
        [LOWP_PROFILE_TORCH] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0xFFFF, 0xFFFF},
                                NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_ML_DTYPES] = {M_RN, SAT_ONLY_OFF, NAN32_FIXED, {0x7FC0, 0xFFC0},
                                    NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        [LOWP_PROFILE_OCP] = {M_ALL, SAT_BOTH_DEF_OFF, NAN32_FIXED, {0x7FC0, 0xFFC0},
                              NAN64_AS_F32, {0, 0}, 0, 0, 0, 0},
    },
    [LOWP_F16] = {
        [LOWP_PROFILE_CUDA] = {M_DIRECTED4, SAT_ONLY_OFF, NAN32_FIXED, {0x7FFF, 0x7FFF},
                               NAN64_FIXED, {0x7FFF, 0x7FFF}, 0, 0, 0, 0},
        [LOWP_PROFILE_TORCH] = {M_RN, SAT_ONLY_OFF, NAN32_PAYLOAD_QUIET, {0, 0},
                                NAN64_VIA_F32, {0, 0}, 1, 0, 0, 0},
        /* numpy's float16 (npy_double_to_half) rounds a double once, unlike ml_dtypes */
        [LOWP_PROFILE_ML_DTYPES] = {M_RN, SAT_ONLY_OFF, NAN32_PAYLOAD, {0, 0},
                                    NAN64_PAYLOAD, {0, 0}, 0, 0, 0, 0},
        [LOWP_PROFILE_OCP] = {M_ALL, SAT_BOTH_DEF_OFF, NAN32_FIXED, {0x7E00, 0xFE00},
                              NAN64_AS_F32, {0, 0}, 0, 0, 0, 0},
    },
};

/* +-Inf input, [saturate][sign] ("Inf input" table; mode-independent: Inf is exact, so even
 * rz keeps Inf where the format has it). E2M1 nosat is never used (refused). E8M0 is
 * unsigned; a profile with e8m0_neg_nan turns -Inf into 0xFF before this table is read. */
static const uint16_t INF_CODE[LOWP_FORMAT_COUNT][2][2] = {
    [LOWP_E2M1] = {{0x7, 0xF}, {0x7, 0xF}},
    [LOWP_E4M3] = {{0x7F, 0xFF}, {0x7E, 0xFE}},
    [LOWP_E5M2] = {{0x7C, 0xFC}, {0x7B, 0xFB}},
    [LOWP_E8M0] = {{0xFF, 0xFF}, {0xFE, 0xFE}},
    [LOWP_BF16] = {{0x7F80, 0xFF80}, {0x7F7F, 0xFF7F}},
    [LOWP_F16] = {{0x7C00, 0xFC00}, {0x7BFF, 0xFBFF}},
};

static int valid_args(lowp_format f, lowp_profile p, lowp_round r)
{
    return (unsigned)f < LOWP_FORMAT_COUNT && (unsigned)p < LOWP_PROFILE_COUNT &&
           (unsigned)r < LOWP_ROUND_COUNT;
}

int lowp_oracle_supported(lowp_format f, lowp_profile p, lowp_round r, int saturate)
{
    if (!valid_args(f, p, r) || (saturate != LOWP_SAT_OFF && saturate != LOWP_SAT_ON))
        return 0;
    const prof_def *pd = &PROF[f][p];
    if (!(pd->modes & (1u << r)))
        return 0;
    switch (pd->sat) {
    case SAT_ONLY_ON:
        return saturate == LOWP_SAT_ON;
    case SAT_ONLY_OFF:
        return saturate == LOWP_SAT_OFF;
    case SAT_BOTH_DEF_ON:
    case SAT_BOTH_DEF_OFF:
        return 1;
    case SAT_NONE:
    default:
        return 0;
    }
}

int lowp_oracle_default_saturate(lowp_format f, lowp_profile p)
{
    if (!valid_args(f, p, LOWP_RN))
        return -1;
    switch (PROF[f][p].sat) {
    case SAT_ONLY_ON:
    case SAT_BOTH_DEF_ON:
        return LOWP_SAT_ON;
    case SAT_ONLY_OFF:
    case SAT_BOTH_DEF_OFF:
        return LOWP_SAT_OFF;
    case SAT_NONE:
    default:
        return -1;
    }
}

/* ---------------------------------------------------------------------------------------
 * MPFR exponent range: every entry point brackets its MPFR work with these, so a caller's
 * own range (per thread) survives and ours never leaks.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    mpfr_exp_t emin, emax;
} erange;

static erange range_save_wide(void)
{
    erange old = {mpfr_get_emin(), mpfr_get_emax()};
    /* Cannot fail: the extreme allowed values are always accepted. */
    mpfr_set_emin(mpfr_get_emin_min());
    mpfr_set_emax(mpfr_get_emax_max());
    return old;
}

static void range_restore(erange old)
{
    mpfr_set_emin(old.emin);
    mpfr_set_emax(old.emax);
}

/* ---------------------------------------------------------------------------------------
 * Decode: the value of a code from the definition, s * sig * 2^exp, evaluated by MPFR.
 * ------------------------------------------------------------------------------------- */

static double signed_nan(int neg)
{
    return copysign((double)NAN, neg ? -1.0 : 1.0);
}

double lowp_oracle_decode(lowp_format f, uint16_t code)
{
    if ((unsigned)f >= LOWP_FORMAT_COUNT)
        return (double)NAN;
    const fmt_def *d = &FMT[f];
    if (code >= (1u << d->bits))
        return (double)NAN;

    unsigned long sig;
    long ex;
    int neg = 0;
    if (d->nan == NAN_E8M0) {
        if (code == 0xFF)
            return (double)NAN;
        sig = 1;
        ex = (long)code - d->bias;
    } else {
        const unsigned emask = (1u << d->ebits) - 1, mmask = (1u << d->mbits) - 1;
        const unsigned e = (code >> d->mbits) & emask, m = code & mmask;
        neg = (code >> (d->bits - 1)) & 1;
        if (d->nan == NAN_IEEE && e == emask)
            return m ? signed_nan(neg) : (neg ? -(double)INFINITY : (double)INFINITY);
        if (d->nan == NAN_ALL_ONES && e == emask && m == mmask)
            return signed_nan(neg);
        /* Subnormals (e == 0) share the exponent of the smallest normal binade. */
        sig = e ? (1ul << d->mbits) | m : m;
        ex = (long)(e ? e : 1) - d->bias - d->mbits;
    }

    erange old = range_save_wide();
    mpfr_t t;
    mpfr_init2(t, 32); /* sig < 2^11: exact, as is the scaling by a power of two */
    mpfr_set_ui(t, sig, MPFR_RNDN);
    mpfr_mul_2si(t, t, ex, MPFR_RNDN);
    if (neg)
        mpfr_neg(t, t, MPFR_RNDN); /* 0 becomes -0 here: -0 codes decode to -0 */
    double v = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clear(t);
    range_restore(old);
    return v;
}

/* ---------------------------------------------------------------------------------------
 * Value -> code tables, built from lowp_oracle_decode once per format.
 * Key order: by value, -0 before +0. Invariant: keys strictly increase (no two non-NaN
 * codes of a format share a value and a sign).
 * ------------------------------------------------------------------------------------- */

typedef struct {
    double v;
    uint16_t code;
} vc_entry;

typedef struct {
    vc_entry *e;
    size_t n;
    int ok;
} vc_table;

static vc_entry tab_e2m1[16], tab_e4m3[256], tab_e5m2[256], tab_e8m0[256];
static vc_entry tab_bf16[65536], tab_f16[65536];
static vc_table TAB[LOWP_FORMAT_COUNT] = {
    [LOWP_E2M1] = {tab_e2m1, 0, 0}, [LOWP_E4M3] = {tab_e4m3, 0, 0},
    [LOWP_E5M2] = {tab_e5m2, 0, 0}, [LOWP_E8M0] = {tab_e8m0, 0, 0},
    [LOWP_BF16] = {tab_bf16, 0, 0}, [LOWP_F16] = {tab_f16, 0, 0},
};
/* 0: not built; 1: being built by one thread; 2: ready (release/acquire on this flag). */
static atomic_int tab_state[LOWP_FORMAT_COUNT];

static int key_cmp(double a, double b)
{
    if (a < b)
        return -1;
    if (a > b)
        return 1;
    int sa = signbit(a) != 0, sb = signbit(b) != 0;
    return sb - sa; /* equal magnitude zero: the negative one first */
}

static int vc_cmp(const void *pa, const void *pb)
{
    return key_cmp(((const vc_entry *)pa)->v, ((const vc_entry *)pb)->v);
}

static void table_build(lowp_format f)
{
    vc_table *t = &TAB[f];
    const unsigned count = 1u << FMT[f].bits;
    size_t n = 0;
    for (unsigned c = 0; c < count; c++) {
        double v = lowp_oracle_decode(f, (uint16_t)c);
        if (!isnan(v))
            t->e[n++] = (vc_entry){v, (uint16_t)c};
    }
    qsort(t->e, n, sizeof t->e[0], vc_cmp);
    t->ok = 1;
    for (size_t i = 1; i < n; i++)
        if (key_cmp(t->e[i - 1].v, t->e[i].v) >= 0)
            t->ok = 0; /* two codes, one value: the definitions above are wrong */
    t->n = n;
}

static const vc_table *table_get(lowp_format f)
{
    if (atomic_load_explicit(&tab_state[f], memory_order_acquire) != 2) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&tab_state[f], &expected, 1)) {
            table_build(f);
            atomic_store_explicit(&tab_state[f], 2, memory_order_release);
        } else {
            /* Another thread builds it; the build takes milliseconds. */
            while (atomic_load_explicit(&tab_state[f], memory_order_acquire) != 2)
                ;
        }
    }
    return &TAB[f];
}

/* The code whose value is exactly v (non-NaN, signed zero respected). -2 if none. */
static int find_code(lowp_format f, double v, uint16_t *code)
{
    const vc_table *t = table_get(f);
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (key_cmp(t->e[mid].v, v) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!t->ok || lo == t->n || key_cmp(t->e[lo].v, v) != 0)
        return -2;
    *code = t->e[lo].code;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Rounding of finite values.
 * ------------------------------------------------------------------------------------- */

static mpfr_rnd_t mpfr_mode(lowp_round r)
{
    switch (r) {
    case LOWP_RZ:
        return MPFR_RNDZ;
    case LOWP_RU:
        return MPFR_RNDU;
    case LOWP_RD:
        return MPFR_RNDD;
    case LOWP_RN:
    case LOWP_RNA: /* not reached: ties-away has its own path */
    default:
        return MPFR_RNDN;
    }
}

/* Round the finite binary64 x into d's precision and exponent range under r. The result is
 * exact as a double; it may exceed max_finite (E4M3 up to 480, others up to +-Inf when MPFR
 * overflows): the caller applies the profile's overflow rule.
 *
 * rn/rz/ru/rd follow the MPFR manual's recipe for emulating a small format: round to p bits
 * in the wide range, then mpfr_check_range into [emin, emax] with the ternary value, then
 * mpfr_subnormalize, which re-rounds to the subnormal precision without double rounding. */
static double round_ieee(const fmt_def *d, lowp_round r, double x)
{
    erange old = range_save_wide();
    double v;
    if (r == LOWP_RNA) {
        /* mpfr_set has no ties-away mode. Scale |x| so that the format's quantum at |x|
         * (its ulp, or the subnormal quantum below the smallest normal) becomes 1; then
         * mpfr_round, which rounds halfway cases away from zero, gives the result. A carry
         * to the next binade gives a power of two, which the format has. */
        if (x == 0.0) {
            range_restore(old);
            return x;
        }
        mpfr_t t;
        mpfr_init2(t, 64); /* holds any double, and any integer below 2^64, exactly */
        mpfr_set_d(t, fabs(x), MPFR_RNDN);
        mpfr_exp_t e = mpfr_get_exp(t) - 1; /* floor(log2 |x|) */
        mpfr_exp_t emin_normal = 1 - d->bias;
        if (e < emin_normal)
            e = emin_normal;
        mpfr_exp_t q = e - d->mbits; /* log2 of the quantum */
        mpfr_mul_2si(t, t, -q, MPFR_RNDN);
        mpfr_round(t, t);
        mpfr_mul_2si(t, t, q, MPFR_RNDN);
        v = mpfr_get_d(t, MPFR_RNDN); /* 2^1024 (from DBL_MAX) reads as Inf: an overflow */
        mpfr_clear(t);
        v = copysign(v, x);
    } else {
        const mpfr_rnd_t rnd = mpfr_mode(r);
        mpfr_t xe, y;
        mpfr_init2(xe, 53);
        mpfr_init2(y, d->mbits + 1);
        mpfr_set_d(xe, x, MPFR_RNDN); /* exact */
        int inex = mpfr_set(y, xe, rnd);
        mpfr_set_emin(fmt_emin(d));
        mpfr_set_emax(fmt_emax(d));
        inex = mpfr_check_range(y, inex, rnd);
        mpfr_subnormalize(y, inex, rnd);
        v = mpfr_get_d(y, MPFR_RNDN);
        mpfr_clear(y);
        mpfr_clear(xe);
    }
    range_restore(old);
    return v;
}

static int toward_zero(lowp_round r, int neg)
{
    return r == LOWP_RZ || (r == LOWP_RD && !neg) || (r == LOWP_RU && neg);
}

/* "Finite values and overflow" of profiles.md: an overflow rounded toward zero gives the
 * largest finite value; any other gives max finite with saturation, else Inf (or the NaN
 * code where the format has no Inf). */
static int finish_ieee(lowp_format f, lowp_round r, int sat, double v, int neg,
                       uint16_t *code)
{
    const fmt_def *d = &FMT[f];
    if (isinf(v) || fabs(v) > d->max_finite) {
        if (toward_zero(r, neg) || sat)
            v = neg ? -d->max_finite : d->max_finite;
        else if (has_inf(d))
            v = neg ? -(double)INFINITY : (double)INFINITY;
        else {
            *code = d->ovf_nan[neg];
            return 0;
        }
    }
    return find_code(f, v, code);
}

/* E8M0: round a > 0 (finite) to a power of two, then clip. Not an IEEE format (no zero, no
 * subnormals), so MPFR's underflow rules do not apply: round at precision 1 in the wide
 * range and apply the profile text's clip and overflow rules by comparison. from_sub32 says
 * that a is a binary32 subnormal above 2^-127 and the profile has the torch/ml_dtypes quirk. */
static int encode_e8m0_mag(lowp_round r, int sat, double a, int from_sub32, uint16_t *code)
{
    double v;
    if (from_sub32 && r == LOWP_RN) {
        /* torch/ml_dtypes take the subnormal's top fraction bit as guard bit and the
         * (zero) implicit bit as LSB, so any value above 2^-127 rounds up. */
        v = 0x1p-126;
    } else {
        erange old = range_save_wide();
        mpfr_t t, p1;
        mpfr_init2(t, 53);
        mpfr_init2(p1, 1);
        mpfr_set_d(t, a, MPFR_RNDN); /* exact */
        if (r == LOWP_RU) {
            mpfr_set(p1, t, MPFR_RNDU);
        } else {
            mpfr_set(p1, t, MPFR_RNDZ); /* rz, rd: magnitude down; rn, rna: lower candidate */
            if ((r == LOWP_RN || r == LOWP_RNA) && mpfr_cmp(p1, t) != 0) {
                /* Nearest in linear value; the midpoint 1.5 * 2^e goes up. */
                mpfr_t mid;
                mpfr_init2(mid, 2);
                mpfr_mul_ui(mid, p1, 3, MPFR_RNDN); /* 3 * 2^e: exact at 2 bits */
                mpfr_div_2ui(mid, mid, 1, MPFR_RNDN);
                if (mpfr_cmp(t, mid) >= 0)
                    mpfr_mul_2ui(p1, p1, 1, MPFR_RNDN);
                mpfr_clear(mid);
            }
        }
        v = mpfr_get_d(p1, MPFR_RNDN); /* 2^1024 reads as Inf: above 2^127 either way */
        mpfr_clear(p1);
        mpfr_clear(t);
        range_restore(old);
    }
    if (v < 0x1p-127)
        v = 0x1p-127; /* every profile clips small results to 2^-127 */
    if (v > 0x1p127) {
        /* Only a double can round toward zero past 2^127 (binary32 stops below 2^128). */
        if (r == LOWP_RZ || r == LOWP_RD || sat)
            v = 0x1p127;
        else {
            *code = FMT[LOWP_E8M0].ovf_nan[0];
            return 0;
        }
    }
    return find_code(LOWP_E8M0, v, code);
}

/* E8M0 special values and sign, then the magnitude. is_f32: x is a binary32 value entering
 * through the binary32 rule (the only place the subnormal quirk exists). */
static int encode_e8m0(const prof_def *pd, lowp_round r, int sat, double x, int is_f32,
                       uint16_t *code)
{
    if (isnan(x)) {
        *code = 0xFF;
        return 0;
    }
    if (signbit(x) && pd->e8m0_neg_nan) {
        *code = 0xFF;
        return 0;
    }
    if (x == 0.0) {
        *code = pd->e8m0_zero;
        return 0;
    }
    double a = fabs(x);
    if (isinf(a)) {
        *code = INF_CODE[LOWP_E8M0][sat][0];
        return 0;
    }
    int sub = is_f32 && pd->e8m0_sub_up && a > 0x1p-127 && a < 0x1p-126;
    return encode_e8m0_mag(r, sat, a, sub, code);
}

/* ---------------------------------------------------------------------------------------
 * Entry points.
 * ------------------------------------------------------------------------------------- */

static int encode_binary32(lowp_format f, const prof_def *pd, lowp_round r, int sat, float x,
                           uint16_t *code)
{
    const uint32_t bits = lowp_f32_bits(x);
    const int neg = (int)(bits >> 31);
    if (isnan(x)) {
        if (pd->nan32 == NAN32_PAYLOAD) {
            /* numpy npy_floatbits_to_halfbits: the top 10 payload bits survive; a payload
             * that would vanish becomes 1 so the result stays a NaN. */
            uint16_t c = (uint16_t)(0x7C00u | ((bits & 0x7FFFFFu) >> 13));
            if (c == 0x7C00u)
                c = 0x7C01u;
            *code = (uint16_t)(c | (neg ? 0x8000u : 0u));
        } else if (pd->nan32 == NAN32_PAYLOAD_QUIET) {
            /* x86 vcvtps2ph: quiet the NaN, keep the top 9 payload bits below the quiet bit */
            *code = (uint16_t)((neg ? 0x8000u : 0u) | 0x7E00u | ((bits & 0x7FFFFFu) >> 13));
        } else {
            *code = pd->nan[neg];
        }
        return 0;
    }
    if (f == LOWP_E8M0)
        return encode_e8m0(pd, r, sat, (double)x, 1, code);
    if (isinf(x)) {
        *code = INF_CODE[f][sat][neg];
        return 0;
    }
    return finish_ieee(f, r, sat, round_ieee(&FMT[f], r, (double)x), neg, code);
}

int lowp_oracle_encode_f32(lowp_format f, lowp_profile p, lowp_round r, int saturate,
                           float x, uint16_t *code)
{
    if (!lowp_oracle_supported(f, p, r, saturate))
        return -1;
    return encode_binary32(f, &PROF[f][p], r, saturate, x, code);
}

/* The C cast (float)x of a NaN as x86-64 (cvtsd2ss) and AArch64 (FCVT, default-NaN off)
 * do it: sign kept, top 23 fraction bits kept, quiet bit forced. */
static float nan_f64_to_f32(double x)
{
    const uint64_t b = lowp_f64_bits(x);
    const uint32_t sign = (uint32_t)(b >> 63) << 31;
    const uint32_t frac = (uint32_t)((b & UINT64_C(0xFFFFFFFFFFFFF)) >> 29);
    return lowp_f32_from_bits(sign | 0x7FC00000u | frac);
}

int lowp_oracle_encode_f64(lowp_format f, lowp_profile p, lowp_round r, int saturate,
                           double x, uint16_t *code)
{
    if (!lowp_oracle_supported(f, p, r, saturate))
        return -1;
    const prof_def *pd = &PROF[f][p];
    const int neg = signbit(x) != 0;

    if (pd->f64_via_f32) {
        /* torch and ml_dtypes: static_cast<float> (RNE, overflow to Inf), then the binary32
         * rule: two roundings, as in the libraries. */
        float xf;
        if (isnan(x))
            xf = nan_f64_to_f32(x);
        else if (isinf(x))
            xf = (float)x;
        else
            xf = (float)round_ieee(&BINARY32, LOWP_RN, x); /* exact: a binary32 value */
        return encode_binary32(f, pd, r, saturate, xf, code);
    }

    /* cuda, ocp and numpy's float16: one rounding from the double. */
    if (isnan(x)) {
        switch (pd->nan64) {
        case NAN64_FIXED:
            *code = pd->nan64c[neg];
            return 0;
        case NAN64_FIXED_TOP2:
            *code = (uint16_t)(pd->nan64c[neg] | (uint16_t)((lowp_f64_bits(x) >> 50) & 3u));
            return 0;
        case NAN64_PAYLOAD: {
            uint16_t m = (uint16_t)((lowp_f64_bits(x) >> 42) & 0x3ffu);
            *code = (uint16_t)((neg ? 0x8000u : 0u) | 0x7c00u | (m ? m : 1u));
            return 0;
        }
        case NAN64_AS_F32:
        case NAN64_VIA_F32:
        default:
            return encode_binary32(f, pd, r, saturate, nan_f64_to_f32(x), code);
        }
    }
    if (f == LOWP_E8M0)
        return encode_e8m0(pd, r, saturate, x, 0, code);
    if (isinf(x)) {
        *code = INF_CODE[f][saturate][neg];
        return 0;
    }
    return finish_ieee(f, r, saturate, round_ieee(&FMT[f], r, x), neg, code);
}
