/* ref/oracle/src/attn_oracle.c: attention computed exactly and rounded once (lowp/attn.h).
 *
 * For one output (query token i, head h, column e) with visible keys j = 0..n-1:
 *
 *   1. Scores, exactly. t_j = sum_d q_d k_jd is accumulated without rounding in a long
 *      fixed-point accumulator (every product of two doubles is an integer below 2^106
 *      times 2^(-2148..1942); 32-bit limbs held in int64 with lazy carries), converted to
 *      an MPFR number of exactly the precision it needs, and s_j = sm_scale * t_j is
 *      formed exactly (precision + 53). Nothing is rounded, so equal scores are found
 *      exactly: the keys are sorted and grouped by score, g = 1..G, with c_g keys and the
 *      exact column sums V_g = sum_{j in g} v_je (the same accumulator).
 *   2. x_g = s_g - max_j s_j, exactly (x_g <= 0, x_G = 0).
 *      Then o = N / L with N = sum_g V_g e^{x_g}, L = sum_g c_g e^{x_g} >= 1.
 *   3. Ziv's strategy with a rigorous enclosure: at working precision p, every e^{x_g} is
 *      enclosed in [RD(e^{x_g}), that + 1 ulp] (mpfr_exp is correctly rounded), and N, L and
 *      o = N / L are enclosed in [o_lo, o_hi] by directed roundings (products, mpfr_sum,
 *      quotient: each rounded outward). If o_lo and o_hi round (RN) to the same binary64
 *      and the same binary32, that is the correctly rounded result of the exact o, since
 *      rounding is monotonic. Otherwise p doubles and step 3 is repeated.
 *   4. Termination, and the exact cases. The x_g are distinct dyadic rationals, so by the
 *      Lindemann-Weierstrass theorem e^{x_1}, ..., e^{x_G} are linearly independent over
 *      the algebraic numbers; sum_g (V_g - r c_g) e^{x_g} = 0 for a rational r therefore
 *      holds only if V_g = r c_g for every g. So o is rational exactly when all group means
 *      V_g / c_g are equal (G = 1: all scores equal; V constant; an all-zero column), and
 *      then o = V_1 / c_1, which is divided directly (the same enclosure test; an exact
 *      quotient converges at once, even on a rounding midpoint). Otherwise o is
 *      irrational, never a midpoint, and the enclosure, whose width shrinks like 2^-p,
 *      eventually excludes every midpoint: the loop terminates.
 *
 * Why 128 bits suffice (the default prec): at p bits the enclosure of o has relative width
 * about 2^(3-p) (1 + kappa), kappa = sum_g |V_g| e^{x_g} / |N| the cancellation in N.
 * Rounding to binary64 is decided unless o lies within that width of a binary64 midpoint:
 * for an o that is not structurally tied to a midpoint and no cancellation, a chance of
 * about 2^(54+3-128) = 2^-71 per output, so a retry at 256 bits is astronomically rare.
 * Retries do happen, by construction, in two situations, and the loop then goes as far as
 * it must: designed cancellation (two keys with scores 2^-100 apart and V = +1, -1: one
 * retry), and outputs that are a rational midpoint up to a tiny perturbation, e.g. scores
 * that agree to 2^-1000 (products of 1e-160 values) with V whose mean is a midpoint (the
 * tests meet those, converging at 2048 bits). The result never depends on prec: prec 128
 * and 256 give identical bits, which the tests check on every fourth case.
 *
 * Underflow. With the widest exponent range, e^{x_g} underflows only for x_g < -2^62 ln 2
 * (scores about 3e18 apart); such a weight is enclosed in [0, 2^(emin-1)], which no
 * precision narrows. If o is then within that of a midpoint, the groups whose weights do
 * not underflow have one mean r (a midpoint; else o is irrational to the precision
 * available and the oracle reports failure) and o - r has the sign of
 * sum_{underflowed g} (c_t V_g - V_t c_g) e^{x_g}, decided exactly by the same enclosure
 * one exponent scale at a time (resolve_underflow, expsum_sign).
 *
 * Special values follow attn.h: a visible score NaN or +Inf, or every visible score -Inf,
 * makes the row NaN; a -Inf score has weight 0 and 0 * (Inf or NaN) is NaN; finite scores
 * have positive weights, so a visible +-Inf in V gives +-Inf (both: NaN).
 *
 * Thread safety: OpenMP over (query, head) rows; every thread has its own workspace and
 * MPFR variables, sets its MPFR exponent range to the widest (so e^{x_g} underflows only
 * for x_g < -2^62 ln 2) and restores it afterwards, and frees its MPFR caches.
 */
#include <stdint.h>

#include <float.h>
#include <gmp.h>
#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/bits.h"
#include "lowp/why.h"
#include "lowp/attn.h"

#define PREC_DEFAULT 128
#define PREC_MAX ((mpfr_prec_t)1 << 17)

/* ---------------------------------------------------------------------------------------
 * The long accumulator. Bit position b weighs 2^(b - XA_BIAS); a product of two finite
 * doubles m_a 2^e_a * m_b 2^e_b (e >= -1074, m < 2^53) lands at position e_a + e_b +
 * XA_BIAS >= 0 and spans at most 106 bits, so the top position is below 2148 + 1942 + 106.
 * ------------------------------------------------------------------------------------- */

#define XA_BIAS 2148
#define XA_LIMBS 140

typedef struct {
    int64_t l[XA_LIMBS];
    int lo, hi; /* touched limbs, lo > hi when none */
} xacc;

static void xa_clear(xacc *a)
{
    for (int i = a->lo; i <= a->hi; i++)
        a->l[i] = 0;
    a->lo = XA_LIMBS;
    a->hi = -1;
}

static void xa_add_u64(xacc *a, unsigned pos, uint64_t v, int neg)
{
    if (v == 0)
        return;
    int i = (int)(pos >> 5);
    unsigned s = pos & 31;
    int64_t c0 = (int64_t)((v << s) & 0xFFFFFFFFu);
    int64_t c1 = (int64_t)((v >> (32 - s)) & 0xFFFFFFFFu);
    int64_t c2 = s ? (int64_t)(v >> (64 - s)) : 0;
    if (neg) {
        a->l[i] -= c0;
        a->l[i + 1] -= c1;
        a->l[i + 2] -= c2;
    } else {
        a->l[i] += c0;
        a->l[i + 1] += c1;
        a->l[i + 2] += c2;
    }
    if (i < a->lo)
        a->lo = i;
    if (i + 2 > a->hi)
        a->hi = i + 2;
}

/* |x| = m 2^e for a finite x; returns the sign bit. */
static int dparts(double x, uint64_t *m, int *e)
{
    uint64_t b = lowp_f64_bits(x);
    int ex = (int)((b >> 52) & 0x7FF);
    uint64_t f = b & ((UINT64_C(1) << 52) - 1);
    if (ex == 0) {
        *m = f;
        *e = -1074;
    } else {
        *m = f | (UINT64_C(1) << 52);
        *e = ex - 1075;
    }
    return (int)(b >> 63);
}

static void xa_add_prod(xacc *a, double x, double y)
{
    uint64_t mx, my;
    int ex, ey;
    int neg = dparts(x, &mx, &ex) ^ dparts(y, &my, &ey);
    if (mx == 0 || my == 0)
        return;
    unsigned pos = (unsigned)(ex + ey + XA_BIAS);
    uint64_t x0 = mx & 0xFFFFFFFFu, x1 = mx >> 32, y0 = my & 0xFFFFFFFFu, y1 = my >> 32;
    xa_add_u64(a, pos, x0 * y0, neg);
    xa_add_u64(a, pos + 32, x1 * y0 + x0 * y1, neg);
    xa_add_u64(a, pos + 64, x1 * y1, neg);
}

static void xa_add_double(xacc *a, double x)
{
    uint64_t m;
    int e;
    int neg = dparts(x, &m, &e);
    xa_add_u64(a, (unsigned)(e + XA_BIAS), m, neg);
}

/* Normalize limbs lo..top to [0, 2^32) with the sign carried into l[top]. */
static void xa_carry(xacc *a, int top)
{
    for (int i = a->lo; i < top; i++) {
        int64_t x = a->l[i];
        int64_t low = (int64_t)((uint64_t)x & 0xFFFFFFFFu);
        a->l[i] = low;
        a->l[i + 1] += (x - low) / ((int64_t)1 << 32);
    }
}

/* The exact value into rop (its precision is set to what the value needs). */
static void xa_get(xacc *a, mpfr_ptr rop, mpz_ptr z, uint32_t *buf)
{
    if (a->hi < a->lo) {
        mpfr_set_prec(rop, MPFR_PREC_MIN);
        mpfr_set_zero(rop, 1);
        return;
    }
    int top = a->hi + 3;
    a->hi = top; /* the limbs up to top are touched now */
    xa_carry(a, top);
    int neg = a->l[top] < 0;
    if (neg) {
        for (int i = a->lo; i <= top; i++)
            a->l[i] = -a->l[i];
        xa_carry(a, top);
    }
    int n = top - a->lo + 1;
    for (int i = 0; i < n; i++)
        buf[i] = (uint32_t)a->l[a->lo + i];
    mpz_import(z, (size_t)n, -1, sizeof(uint32_t), 0, 0, buf);
    size_t bits = mpz_sizeinbase(z, 2);
    mpfr_set_prec(rop, bits < MPFR_PREC_MIN ? MPFR_PREC_MIN : (mpfr_prec_t)bits);
    int t = mpfr_set_z_2exp(rop, z, (mpfr_exp_t)32 * a->lo - XA_BIAS, MPFR_RNDN);
    (void)t; /* exact: the precision holds every bit */
    if (neg)
        mpfr_neg(rop, rop, MPFR_RNDN);
}

/* rop = a - b exactly (a, b finite). */
static void exact_sub(mpfr_ptr rop, mpfr_srcptr a, mpfr_srcptr b)
{
    if (mpfr_zero_p(b)) {
        mpfr_set_prec(rop, mpfr_get_prec(a));
        mpfr_set(rop, a, MPFR_RNDN);
        return;
    }
    if (mpfr_zero_p(a)) {
        mpfr_set_prec(rop, mpfr_get_prec(b));
        mpfr_neg(rop, b, MPFR_RNDN);
        return;
    }
    mpfr_exp_t ea = mpfr_get_exp(a), eb = mpfr_get_exp(b);
    mpfr_exp_t la = ea - (mpfr_exp_t)mpfr_get_prec(a), lb = eb - (mpfr_exp_t)mpfr_get_prec(b);
    mpfr_exp_t hi = (ea > eb ? ea : eb) + 1, lo = la < lb ? la : lb;
    mpfr_set_prec(rop, (mpfr_prec_t)(hi - lo));
    mpfr_sub(rop, a, b, MPFR_RNDN);
}

/* ---------------------------------------------------------------------------------------
 * Workspace (one per thread)
 * ------------------------------------------------------------------------------------- */

typedef struct {
    mpfr_ptr s;
    size_t j;
} key;

typedef struct {
    size_t cap;
    xacc xa;
    mpz_t z;
    uint32_t buf[XA_LIMBS];
    int *kind;          /* [cap] 0 finite score, -1 score -Inf, +1 NaN or +Inf */
    key *keys;          /* [cap] finite keys, sorted by score */
    mpfr_t *sc;         /* [cap] exact scores */
    size_t G;
    size_t *gstart, *gcount; /* [cap] groups of equal scores, in keys[] order */
    mpfr_t *x;          /* [cap] exact x_g */
    mpfr_t *Elo, *Ehi;  /* [cap] enclosure of e^{x_g} at precision Ep */
    mpfr_prec_t Ep;
    mpfr_t *tlo, *thi;  /* [cap] terms */
    mpfr_ptr *plo, *phi;
    mpfr_t *Vg;         /* [cap] exact V_g of groups with several keys */
    double *Vd;         /* [cap] V_g of one-key groups */
    mpfr_t *cf, *y;     /* [cap] coefficients and shifted exponents (underflow resolution) */
    size_t *set;        /* [cap] */
    mpfr_t t, Dlo, Dhi, Nlo, Nhi, olo, ohi, a, b;
    int ok;
    int encl;          /* column(): olo, ohi enclose the exact output (not after resolve_underflow) */
} ows;

static void ows_free(ows *w)
{
    if (w->sc) {
        for (size_t i = 0; i < w->cap; i++) {
            mpfr_clear(w->sc[i]);
            mpfr_clear(w->x[i]);
            mpfr_clear(w->Elo[i]);
            mpfr_clear(w->Ehi[i]);
            mpfr_clear(w->tlo[i]);
            mpfr_clear(w->thi[i]);
            mpfr_clear(w->Vg[i]);
            mpfr_clear(w->cf[i]);
            mpfr_clear(w->y[i]);
        }
        mpfr_clears(w->t, w->Dlo, w->Dhi, w->Nlo, w->Nhi, w->olo, w->ohi, w->a, w->b,
                    (mpfr_ptr)0);
        mpz_clear(w->z);
    }
    free(w->kind);
    free(w->keys);
    free(w->sc);
    free(w->gstart);
    free(w->gcount);
    free(w->x);
    free(w->Elo);
    free(w->Ehi);
    free(w->tlo);
    free(w->thi);
    free(w->plo);
    free(w->phi);
    free(w->Vg);
    free(w->Vd);
    free(w->cf);
    free(w->y);
    free(w->set);
    memset(w, 0, sizeof *w);
}

static int ows_init(ows *w, size_t cap)
{
    memset(w, 0, sizeof *w);
    w->cap = cap;
    w->xa.lo = XA_LIMBS;
    w->xa.hi = -1;
    w->kind = malloc(cap * sizeof *w->kind);
    w->keys = malloc(cap * sizeof *w->keys);
    w->gstart = malloc(cap * sizeof *w->gstart);
    w->gcount = malloc(cap * sizeof *w->gcount);
    w->plo = malloc(cap * sizeof *w->plo);
    w->phi = malloc(cap * sizeof *w->phi);
    w->Vd = malloc(cap * sizeof *w->Vd);
    w->set = malloc(cap * sizeof *w->set);
    mpfr_t **arr[] = {&w->x, &w->Elo, &w->Ehi, &w->tlo, &w->thi, &w->Vg, &w->cf, &w->y};
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
        *arr[i] = malloc(cap * sizeof(mpfr_t));
    int ok = w->kind && w->keys && w->gstart && w->gcount && w->plo && w->phi && w->Vd && w->set;
    for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++)
        ok = ok && *arr[i] != NULL;
    w->sc = ok ? malloc(cap * sizeof(mpfr_t)) : NULL;
    if (w->sc == NULL) {
        ows_free(w);
        return 0;
    }
    for (size_t i = 0; i < cap; i++) {
        mpfr_init2(w->sc[i], 64);
        mpfr_init2(w->x[i], 64);
        mpfr_init2(w->Elo[i], PREC_DEFAULT);
        mpfr_init2(w->Ehi[i], PREC_DEFAULT);
        mpfr_init2(w->tlo[i], PREC_DEFAULT);
        mpfr_init2(w->thi[i], PREC_DEFAULT);
        mpfr_init2(w->Vg[i], 64);
        mpfr_init2(w->cf[i], 64);
        mpfr_init2(w->y[i], 64);
        w->plo[i] = w->tlo[i];
        w->phi[i] = w->thi[i];
    }
    mpfr_inits2(PREC_DEFAULT, w->t, w->Dlo, w->Dhi, w->Nlo, w->Nhi, w->olo, w->ohi, w->a, w->b,
                (mpfr_ptr)0);
    mpz_init(w->z);
    return 1;
}

static int key_cmp(const void *pa, const void *pb)
{
    const key *a = pa, *b = pb;
    int c = mpfr_cmp(a->s, b->s);
    if (c != 0)
        return c;
    return (a->j > b->j) - (a->j < b->j);
}

/* IEEE class of the exact score of key j when q or k has a non-finite element:
 * 0 finite, -1 -Inf, +1 NaN or +Inf. */
static int score_class(const double *qr, const double *kr, size_t D, double sm_scale)
{
    int pos = 0, neg = 0;
    for (size_t d = 0; d < D; d++) {
        double a = qr[d], b = kr[d];
        if (isnan(a) || isnan(b) || (isinf(a) && b == 0.0) || (isinf(b) && a == 0.0))
            return 1;
        if (isinf(a) || isinf(b)) {
            int up = (a < 0) == (b < 0);
            if (sm_scale < 0)
                up = !up;
            if (up)
                pos = 1;
            else
                neg = 1;
        }
    }
    return pos ? 1 : (neg ? -1 : 0);
}

/* e^{x_g} enclosures and L's enclosure at precision p. */
static void ensure_E(ows *w, mpfr_prec_t p)
{
    if (w->Ep == p)
        return;
    for (size_t g = 0; g < w->G; g++) {
        mpfr_set_prec(w->Elo[g], p);
        mpfr_set_prec(w->Ehi[g], p);
        int t = mpfr_exp(w->Elo[g], w->x[g], MPFR_RNDD);
        mpfr_set(w->Ehi[g], w->Elo[g], MPFR_RNDN);
        if (t != 0)
            mpfr_nextabove(w->Ehi[g]);
        mpfr_set_prec(w->tlo[g], p);
        mpfr_set_prec(w->thi[g], p);
        mpfr_mul_ui(w->tlo[g], w->Elo[g], (unsigned long)w->gcount[g], MPFR_RNDD);
        mpfr_mul_ui(w->thi[g], w->Ehi[g], (unsigned long)w->gcount[g], MPFR_RNDU);
    }
    mpfr_set_prec(w->Dlo, p);
    mpfr_set_prec(w->Dhi, p);
    mpfr_sum(w->Dlo, w->plo, (unsigned long)w->G, MPFR_RNDD);
    mpfr_sum(w->Dhi, w->phi, (unsigned long)w->G, MPFR_RNDU);
    w->Ep = p;
}

static int vsign(const ows *w, size_t g)
{
    if (w->gcount[g] > 1)
        return mpfr_sgn(w->Vg[g]);
    return (w->Vd[g] > 0) - (w->Vd[g] < 0);
}

/* rop = V_g * c exactly. */
static void v_times(ows *w, size_t g, unsigned long c, mpfr_ptr rop)
{
    if (w->gcount[g] > 1) {
        mpfr_set_prec(rop, mpfr_get_prec(w->Vg[g]) + 64);
        mpfr_mul_ui(rop, w->Vg[g], c, MPFR_RNDN);
    } else {
        mpfr_set_prec(rop, 53 + 64);
        mpfr_set_d(rop, w->Vd[g], MPFR_RNDN);
        mpfr_mul_ui(rop, rop, c, MPFR_RNDN);
    }
}

typedef struct {
    unsigned long long outputs, retries, rational;
    unsigned long max_prec;
} ostats;

/* The sign of F = sum_{g in set} cf_g e^{x_g} (cf_g, x_g exact), or 2 if it cannot be
 * decided below PREC_MAX bits. Shifted by the largest x in the set, the terms whose
 * exponential does not underflow are enclosed as in column(); if their coefficients are
 * all zero they contribute exactly 0 and the rest (the underflowed terms) is decided the
 * same way, one exponent scale at a time. Otherwise their sum is not 0 (distinct x_g:
 * Lindemann-Weierstrass), and outweighs the underflowed terms (each below 2^(emin-1)
 * times its coefficient) once the precision resolves it. Uses tlo/thi/Elo/Ehi (w->Ep is
 * reset). */
static int expsum_sign(ows *w, size_t m)
{
    w->Ep = 0;
    while (m > 0) {
        size_t top = w->set[0];
        for (size_t i = 1; i < m; i++)
            if (mpfr_cmp(w->x[w->set[i]], w->x[top]) > 0)
                top = w->set[i];
        for (size_t i = 0; i < m; i++)
            exact_sub(w->y[w->set[i]], w->x[w->set[i]], w->x[top]);
        int allzero = 1;
        for (mpfr_prec_t p = 256; p <= PREC_MAX; p *= 2) {
            allzero = 1;
            for (size_t i = 0; i < m; i++) {
                size_t g = w->set[i];
                mpfr_set_prec(w->Elo[g], p);
                mpfr_set_prec(w->Ehi[g], p);
                int t = mpfr_exp(w->Elo[g], w->y[g], MPFR_RNDD);
                mpfr_set(w->Ehi[g], w->Elo[g], MPFR_RNDN);
                if (t != 0)
                    mpfr_nextabove(w->Ehi[g]);
                if (!mpfr_zero_p(w->Elo[g]) && !mpfr_zero_p(w->cf[g]))
                    allzero = 0;
                int sg = mpfr_sgn(w->cf[g]);
                mpfr_set_prec(w->tlo[i], p);
                mpfr_set_prec(w->thi[i], p);
                mpfr_mul(w->tlo[i], sg >= 0 ? w->Elo[g] : w->Ehi[g], w->cf[g], MPFR_RNDD);
                mpfr_mul(w->thi[i], sg >= 0 ? w->Ehi[g] : w->Elo[g], w->cf[g], MPFR_RNDU);
            }
            if (allzero)
                break;
            mpfr_set_prec(w->Nlo, p);
            mpfr_set_prec(w->Nhi, p);
            mpfr_sum(w->Nlo, w->plo, (unsigned long)m, MPFR_RNDD);
            mpfr_sum(w->Nhi, w->phi, (unsigned long)m, MPFR_RNDU);
            if (mpfr_sgn(w->Nlo) > 0)
                return 1;
            if (mpfr_sgn(w->Nhi) < 0)
                return -1;
        }
        if (!allzero)
            return 2;
        size_t k = 0; /* keep the underflowed terms */
        for (size_t i = 0; i < m; i++)
            if (mpfr_zero_p(w->Elo[w->set[i]]))
                w->set[k++] = w->set[i];
        m = k;
    }
    return 0;
}

/* The Ziv loop cannot converge when some e^{x_g} underflow MPFR's widest exponent range
 * (x_g < -2^62 ln 2: scores ~1e18 apart) and the others' part of o is a rounding midpoint.
 * Then the groups that do not underflow must have one mean r (else o is not within
 * 2^(emin) of a midpoint: return -1, undecided) and o - r has the sign of
 * F = sum_{g underflowed} (c_t V_g - V_t c_g) e^{x_g}: o rounds as r nudged that way. */
static int resolve_underflow(ows *w, double *o64, float *o32)
{
    size_t t = w->G - 1; /* x = 0 */
    size_t m = 0;
    for (size_t g = 0; g < w->G; g++) {
        v_times(w, g, (unsigned long)w->gcount[t], w->a);
        v_times(w, t, (unsigned long)w->gcount[g], w->b);
        if (mpfr_zero_p(w->Elo[g])) {
            exact_sub(w->cf[g], w->a, w->b);
            w->set[m++] = g;
        } else if (!mpfr_equal_p(w->a, w->b)) {
            return -1;
        }
    }
    int sg = expsum_sign(w, m);
    if (sg == 2)
        return -1;
    mpfr_set_prec(w->olo, 8192);
    v_times(w, t, 1, w->a);
    if (mpfr_div_ui(w->olo, w->a, (unsigned long)w->gcount[t], MPFR_RNDN) != 0)
        return -1; /* r is not a short dyadic: not a midpoint, nothing to resolve */
    if (sg > 0)
        mpfr_nextabove(w->olo);
    else if (sg < 0)
        mpfr_nextbelow(w->olo);
    *o64 = mpfr_get_d(w->olo, MPFR_RNDN);
    *o32 = mpfr_get_flt(w->olo, MPFR_RNDN);
    return 0;
}

/* One finite column: groups and V_g are set. Returns 0 or -1 (no convergence). */
static int column(ows *w, mpfr_prec_t p0, double *o64, float *o32, ostats *st)
{
    int rational = 1;
    if (w->G > 1) {
        v_times(w, 0, (unsigned long)w->gcount[1], w->a);
        v_times(w, 1, (unsigned long)w->gcount[0], w->b);
        rational = mpfr_equal_p(w->a, w->b);
        for (size_t g = 2; g < w->G && rational; g++) {
            v_times(w, 0, (unsigned long)w->gcount[g], w->a);
            v_times(w, g, (unsigned long)w->gcount[0], w->b);
            rational = mpfr_equal_p(w->a, w->b);
        }
    }
    for (mpfr_prec_t p = p0; p <= PREC_MAX; p *= 2) {
        mpfr_set_prec(w->olo, p);
        mpfr_set_prec(w->ohi, p);
        if (rational) {
            v_times(w, 0, 1, w->a);
            mpfr_div_ui(w->olo, w->a, (unsigned long)w->gcount[0], MPFR_RNDD);
            mpfr_div_ui(w->ohi, w->a, (unsigned long)w->gcount[0], MPFR_RNDU);
        } else {
            ensure_E(w, p);
            for (size_t g = 0; g < w->G; g++) {
                int sg = vsign(w, g);
                mpfr_ptr lo = w->tlo[g], hi = w->thi[g];
                mpfr_srcptr Ea = sg >= 0 ? w->Elo[g] : w->Ehi[g]; /* for the lower end */
                mpfr_srcptr Eb = sg >= 0 ? w->Ehi[g] : w->Elo[g];
                if (w->gcount[g] > 1) {
                    mpfr_mul(lo, Ea, w->Vg[g], MPFR_RNDD);
                    mpfr_mul(hi, Eb, w->Vg[g], MPFR_RNDU);
                } else {
                    mpfr_mul_d(lo, Ea, w->Vd[g], MPFR_RNDD);
                    mpfr_mul_d(hi, Eb, w->Vd[g], MPFR_RNDU);
                }
            }
            mpfr_set_prec(w->Nlo, p);
            mpfr_set_prec(w->Nhi, p);
            mpfr_sum(w->Nlo, w->plo, (unsigned long)w->G, MPFR_RNDD);
            mpfr_sum(w->Nhi, w->phi, (unsigned long)w->G, MPFR_RNDU);
            /* tlo/thi now hold N's terms: L's enclosure was summed in ensure_E already */
            if (mpfr_sgn(w->Nlo) >= 0) {
                mpfr_div(w->olo, w->Nlo, w->Dhi, MPFR_RNDD);
                mpfr_div(w->ohi, w->Nhi, w->Dlo, MPFR_RNDU);
            } else if (mpfr_sgn(w->Nhi) <= 0) {
                mpfr_div(w->olo, w->Nlo, w->Dlo, MPFR_RNDD);
                mpfr_div(w->ohi, w->Nhi, w->Dhi, MPFR_RNDU);
            } else {
                mpfr_div(w->olo, w->Nlo, w->Dlo, MPFR_RNDD);
                mpfr_div(w->ohi, w->Nhi, w->Dlo, MPFR_RNDU);
            }
        }
        double dlo = mpfr_get_d(w->olo, MPFR_RNDN), dhi = mpfr_get_d(w->ohi, MPFR_RNDN);
        float flo = mpfr_get_flt(w->olo, MPFR_RNDN), fhi = mpfr_get_flt(w->ohi, MPFR_RNDN);
        int done = dlo == dhi && flo == fhi;
        w->encl = 1;
        if (done) {
            *o64 = dlo;
            *o32 = flo;
        } else if (!rational && p >= 1024) {
            int under = 0;
            for (size_t g = 0; g < w->G && !under; g++)
                under = mpfr_zero_p(w->Elo[g]);
            done = under && resolve_underflow(w, o64, o32) == 0;
            w->encl = !done;
        }
        if (done) {
            st->outputs++;
            st->retries += p > p0;
            st->rational += (unsigned long long)rational;
            if ((unsigned long)p > st->max_prec)
                st->max_prec = (unsigned long)p;
            return 0;
        }
    }
    return -1;
}

/* max |x - o| over o in the enclosure [olo, ohi] of the last column(), rounded up. */
static double enclosure_dist(ows *w, double x)
{
    mpfr_prec_t p = mpfr_get_prec(w->olo) > mpfr_get_prec(w->ohi) ? mpfr_get_prec(w->olo)
                                                                    : mpfr_get_prec(w->ohi);
    mpfr_set_prec(w->a, p + 64);
    mpfr_set_prec(w->b, p + 64);
    mpfr_d_sub(w->a, x, w->ohi, MPFR_RNDD); /* x - o >= a */
    mpfr_d_sub(w->b, x, w->olo, MPFR_RNDU); /* x - o <= b */
    mpfr_abs(w->a, w->a, MPFR_RNDN);
    mpfr_abs(w->b, w->b, MPFR_RNDN);
    double da = mpfr_get_d(w->a, MPFR_RNDU), db = mpfr_get_d(w->b, MPFR_RNDU);
    return da > db ? da : db;
}

/* One row (i, h), the columns e with cols[e] != 0 (every column when cols is NULL; the
 * others are not written). Returns 0, or -1 if some output did not converge. */
static int oracle_row(const lowp_attn_shape *s, const double *q, const double *k, const double *v,
                      size_t i, size_t h, mpfr_prec_t p0, const unsigned char *cols,
                      float *out32, double *out64, const double *cmp, double *cmp_err, ows *w,
                      ostats *st)
{
    const size_t D = s->qk_dim, E = s->vo_dim, nkv = s->num_kv_heads;
    const size_t g0 = h / (s->num_q_heads / nkv), n = s->q_offset + i + 1;
    const size_t row = i * s->num_q_heads + h;
    const double *qr = q + row * D;
    int qfinite = 1;
    for (size_t d = 0; d < D; d++)
        qfinite &= isfinite(qr[d]) != 0;

    /* scores: classes, then exact values of the finite ones */
    int row_nan = 0;
    size_t nf = 0;
    for (size_t j = 0; j < n; j++) {
        const double *kr = k + (j * nkv + g0) * D;
        int finite = qfinite;
        for (size_t d = 0; d < D && finite; d++)
            finite = isfinite(kr[d]) != 0;
        w->kind[j] = finite ? 0 : score_class(qr, kr, D, s->sm_scale);
        if (w->kind[j] > 0)
            row_nan = 1;
        if (w->kind[j] != 0 || row_nan)
            continue;
        xa_clear(&w->xa);
        for (size_t d = 0; d < D; d++)
            xa_add_prod(&w->xa, qr[d], kr[d]);
        xa_get(&w->xa, w->t, w->z, w->buf);
        mpfr_set_prec(w->sc[j], mpfr_get_prec(w->t) + 53);
        mpfr_mul_d(w->sc[j], w->t, s->sm_scale, MPFR_RNDN); /* exact */
        w->keys[nf].s = w->sc[j];
        w->keys[nf].j = j;
        nf++;
    }
    if (row_nan || nf == 0) {
        for (size_t e = 0; e < E; e++) {
            if (cols != NULL && !cols[e])
                continue;
            if (out64)
                out64[row * E + e] = NAN;
            if (out32)
                out32[row * E + e] = NAN;
            if (cmp_err)
                cmp_err[row * E + e] = NAN;
        }
        return 0;
    }

    /* groups of equal scores, x_g = s_g - max */
    qsort(w->keys, nf, sizeof *w->keys, key_cmp);
    w->G = 0;
    for (size_t a = 0; a < nf;) {
        size_t b = a + 1;
        while (b < nf && mpfr_equal_p(w->keys[b].s, w->keys[a].s))
            b++;
        w->gstart[w->G] = a;
        w->gcount[w->G] = b - a;
        w->G++;
        a = b;
    }
    mpfr_srcptr smax = w->keys[nf - 1].s;
    for (size_t g = 0; g < w->G; g++)
        exact_sub(w->x[g], w->keys[w->gstart[g]].s, smax);
    w->Ep = 0;

    for (size_t e = 0; e < E; e++) {
        if (cols != NULL && !cols[e])
            continue;
        /* special values of V */
        int vnan = 0, pinf = 0, ninf = 0;
        for (size_t j = 0; j < n; j++) {
            double x = v[(j * nkv + g0) * E + e];
            if (isnan(x) || (w->kind[j] < 0 && isinf(x)))
                vnan = 1;
            else if (isinf(x)) {
                if (x > 0)
                    pinf = 1;
                else
                    ninf = 1;
            }
        }
        double r64, err = NAN;
        float r32;
        if (vnan || (pinf && ninf)) {
            r64 = NAN;
            r32 = NAN;
        } else if (pinf || ninf) {
            r64 = pinf ? INFINITY : -INFINITY;
            r32 = (float)r64;
        } else {
            for (size_t g = 0; g < w->G; g++) {
                const key *kg = w->keys + w->gstart[g];
                if (w->gcount[g] == 1) {
                    w->Vd[g] = v[(kg->j * nkv + g0) * E + e];
                } else {
                    xa_clear(&w->xa);
                    for (size_t m = 0; m < w->gcount[g]; m++)
                        xa_add_double(&w->xa, v[(kg[m].j * nkv + g0) * E + e]);
                    xa_get(&w->xa, w->Vg[g], w->z, w->buf);
                }
            }
            if (column(w, p0, &r64, &r32, st))
                return -1;
            if (cmp != NULL && w->encl && isfinite(cmp[row * E + e]))
                err = enclosure_dist(w, cmp[row * E + e]);
        }
        if (cmp_err)
            cmp_err[row * E + e] = err;
        if (out64)
            out64[row * E + e] = r64;
        if (out32)
            out32[row * E + e] = r32;
    }
    return 0;
}

/* The oracle on rows (row indices; NULL: rows 0..n-1), OpenMP over them; cols, if not
 * NULL, is a [row][vo_dim] mask of the columns to compute. Every thread has its own
 * workspace and MPFR variables, sets its MPFR exponent range to the widest and restores
 * it, and frees its MPFR caches. Statistics are added to *tot. Returns 0, or -1 with a
 * reason (out of memory, no convergence). */
static int oracle_rows(const lowp_attn_shape *s, const double *q, const double *k, const double *v,
                       mpfr_prec_t prec, const size_t *rows, size_t n, const unsigned char *cols,
                       float *out32, double *out64, const double *cmp, double *cmp_err, ostats *tot,
                       char *why, size_t why_len)
{
    int nomem = 0, diverged = 0;
#pragma omp parallel if (n > 1) reduction(| : nomem, diverged)
    {
        mpfr_exp_t emin = mpfr_get_emin(), emax = mpfr_get_emax();
        mpfr_set_emin(mpfr_get_emin_min());
        mpfr_set_emax(mpfr_get_emax_max());
        ostats st = {0, 0, 0, 0};
        ows w;
        if (!ows_init(&w, s->ctx)) {
            nomem = 1;
        } else {
#pragma omp for schedule(dynamic, 1)
            for (long x = 0; x < (long)n; x++) {
                if (diverged)
                    continue;
                size_t r = rows != NULL ? rows[x] : (size_t)x;
                size_t i = r / s->num_q_heads, h = r % s->num_q_heads;
                if (oracle_row(s, q, k, v, i, h, prec, cols != NULL ? cols + r * s->vo_dim : NULL, out32,
                               out64, cmp, cmp_err, &w, &st))
                    diverged = 1;
            }
            ows_free(&w);
        }
#pragma omp critical(lowp_attn_oracle_stats)
        {
            tot->outputs += st.outputs;
            tot->retries += st.retries;
            tot->rational += st.rational;
            if (st.max_prec > tot->max_prec)
                tot->max_prec = st.max_prec;
        }
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
        mpfr_set_emin(emin);
        mpfr_set_emax(emax);
    }
    if (nomem)
        return lowp_why_set(why, why_len, "out of memory for the attention oracle");
    if (diverged)
        return lowp_why_set(why, why_len,
                            "the attention oracle did not converge below 131072 bits");
    return 0;
}

static int oracle_run(const lowp_attn_shape *s_in, const double *q, const double *k,
                      const double *v, unsigned prec, float *out32, double *out64,
                      const double *cmp, double *cmp_err, lowp_attn_oracle_stats *stats,
                      char *why, size_t why_len)
{
    if (s_in == NULL)
        return lowp_why_set(why, why_len, "shape is NULL");
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, why, why_len))
        return -1;
    if (q == NULL || k == NULL || v == NULL)
        return lowp_why_set(why, why_len, "q, k and v must not be NULL");
    if (prec == 0)
        prec = PREC_DEFAULT;
    if (prec < 32 || (mpfr_prec_t)prec > PREC_MAX / 2)
        return lowp_why_set(why, why_len, "prec must be 0 (128) or between 32 and 65536 bits");
    ostats tot = {0, 0, 0, 0};
    if (oracle_rows(&s, q, k, v, (mpfr_prec_t)prec, NULL, s.q_len * s.num_q_heads, NULL, out32, out64, cmp,
                    cmp_err, &tot, why, why_len))
        return -1;
    if (stats != NULL) {
        stats->outputs += tot.outputs;
        stats->retries += tot.retries;
        stats->rational += tot.rational;
        if (tot.max_prec > stats->max_prec)
            stats->max_prec = tot.max_prec;
    }
    return 0;
}

int lowp_attn_oracle_mpfr_ex(const lowp_attn_shape *s, const double *q, const double *k,
                             const double *v, unsigned prec, float *out32, double *out64,
                             lowp_attn_oracle_stats *stats, char *why, size_t why_len)
{
    return oracle_run(s, q, k, v, prec, out32, out64, NULL, NULL, stats, why, why_len);
}

int lowp_attn_oracle_dist(const lowp_attn_shape *s, const double *q, const double *k,
                          const double *v, const double *x, double *dist, float *out32,
                          double *out64, char *why, size_t why_len)
{
    if (x == NULL || dist == NULL)
        return lowp_why_set(why, why_len, "x and dist must not be NULL");
    return oracle_run(s, q, k, v, 0, out32, out64, x, dist, NULL, why, why_len);
}

int lowp_attn_oracle_mpfr(const lowp_attn_shape *s, const double *q, const double *k,
                          const double *v, unsigned prec, float *out32, double *out64, char *why,
                          size_t why_len)
{
    return lowp_attn_oracle_mpfr_ex(s, q, k, v, prec, out32, out64, NULL, why, why_len);
}

/* ---------------------------------------------------------------------------------------
 * Correctly rounded binary32 output, fast: the binary64 reference decides what its
 * a-posteriori bound decides, the oracle the rest, output by output.
 * ------------------------------------------------------------------------------------- */

int lowp_attn_f32_decided(double x, double bound, float *out)
{
    if (!isfinite(x) || !(bound >= 0) || !isfinite(bound))
        return 0;
    /* two binary64 ulps outward, so that forming x - b and x + b cannot shrink the interval */
    double lo = nextafter(nextafter(x - bound, -INFINITY), -INFINITY);
    double hi = nextafter(nextafter(x + bound, INFINITY), INFINITY);
    float flo = (float)lo, fhi = (float)hi;
    if (flo != fhi || signbit(flo) != signbit(fhi))
        return 0;
    *out = flo;
    return 1;
}

int lowp_attn_rounded(const lowp_attn_shape *s_in, const double *q, const double *k,
                      const double *v, float *out32, lowp_attn_rounded_stats *stats, char *why,
                      size_t why_len)
{
    if (s_in == NULL)
        return lowp_why_set(why, why_len, "shape is NULL");
    lowp_attn_shape s = *s_in;
    if (lowp_attn_check_shape(&s, why, why_len))
        return -1;
    if (q == NULL || k == NULL || v == NULL || out32 == NULL)
        return lowp_why_set(why, why_len, "q, k, v and out32 must not be NULL");
    const size_t rows = s.q_len * s.num_q_heads, E = s.vo_dim;
    double *ref = malloc(rows * E * sizeof *ref), *bnd = malloc(rows * E * sizeof *bnd);
    unsigned char *open = malloc(rows * E);
    size_t *orow = malloc(rows * sizeof *orow);
    if (ref == NULL || bnd == NULL || open == NULL || orow == NULL) {
        free(ref);
        free(bnd);
        free(open);
        free(orow);
        return lowp_why_set(why, why_len, "out of memory for the attention reference");
    }
    int rc = lowp_attn_ref_f64_bounded(&s, q, k, v, ref, bnd, why, why_len);
    size_t n_open = 0, n_rows = 0;
    for (size_t r = 0; r < rows && rc == 0; r++) {
        size_t before = n_open;
        for (size_t e = 0; e < E; e++) {
            size_t x = r * E + e;
            open[x] = !lowp_attn_f32_decided(ref[x], bnd[x], &out32[x]);
            n_open += open[x];
        }
        if (n_open > before)
            orow[n_rows++] = r;
    }
    free(ref);
    free(bnd);
    ostats tot = {0, 0, 0, 0};
    if (rc == 0 && n_rows > 0) /* the open rows, each with only its open columns */
        rc = oracle_rows(&s, q, k, v, PREC_DEFAULT, orow, n_rows, open, out32, NULL, NULL, NULL, &tot, why,
                         why_len);
    free(open);
    free(orow);
    if (rc != 0)
        return -1;
    if (stats != NULL) {
        stats->outputs += rows * E;
        stats->by_f64 += rows * E - n_open;
        stats->by_oracle += n_open;
        stats->oracle_rows += n_rows;
    }
    return 0;
}
