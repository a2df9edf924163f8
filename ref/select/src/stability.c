/* ref/select/src/stability.c: error bounds of selector scores under quantized keys and the
 * certified-stable test (lowp/select.h derives every term). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp/why.h"

#define EPS_RECIPE 0x1p-20 /* relative error of a recipe's binary32 t' = x / (S g) */
#define INFLATE (1.0 + 0x1p-40)

static double gamma_n(size_t n) { return n ? (double)n * 0x1p-53 / (1.0 - (double)n * 0x1p-53) : 0.0; }
static double r32(double z) { return 0x1p-23 * fabs(z) + 0x1p-149; }
static double r16(double z) { return 0x1p-8 * fabs(z) + 0x1p-133; }

/* half gap above the magnitude code m (at the largest code: the clamp rule) */
static double halfgap_code(lowp_format f, uint16_t m)
{
    uint16_t top = lowp_format_max_code(f);
    if (m >= top) {
        double M = lowp_decode_f64(f, top), below = M - lowp_decode_f64(f, (uint16_t)(top - 1));
        int E;
        frexp(M, &E); /* M = fr 2^E, fr in [0.5, 1): the binade ends at 2^E */
        double clamp = ldexp(1.0, E) - M;
        return below / 2 > clamp ? below / 2 : clamp;
    }
    return (lowp_decode_f64(f, (uint16_t)(m + 1)) - lowp_decode_f64(f, m)) / 2;
}

static uint16_t magnitude(lowp_format f, uint16_t code) { return code & (uint16_t)((1u << (lowp_format_bits(f) - 1)) - 1); }

double lowp_select_halfgap(lowp_format f, double x)
{
    lowp_codec c; /* x is a value of f, so no overflow: the format's own saturation rule
                   * (E2M1 has no other: SAT_OFF would refuse it) */
    if (lowp_codec_init(&c, f, LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_DEFAULT, NULL, 0))
        return NAN;
    uint16_t code = lowp_encode_f64(&c, x);
    if (lowp_code_is_nan(f, code) || lowp_code_is_inf(f, code) || lowp_decode_f64(f, code) != x)
        return NAN;
    return halfgap_code(f, magnitude(f, code));
}

static double bound_of(double e, double h, double s)
{
    if (isnan(e) || isnan(h) || isnan(s) || isinf(e))
        return INFINITY;
    return s * (h + EPS_RECIPE * (fabs(e) + 2 * h));
}

double lowp_select_elem_bound(lowp_format f, double e, double s) { return bound_of(e, lowp_select_halfgap(f, e), s); }

void lowp_select_quant_bound(lowp_block_format f, float dec, const uint8_t *codes, const uint8_t *scales, size_t n,
                             double *delta)
{
    lowp_format ef = lowp_block_element_format(f);
    size_t bs = lowp_block_size(f);
    int has = lowp_block_has_scales(f);
    lowp_format sf = f == LOWP_NVFP4 ? LOWP_E4M3 : LOWP_E8M0;
    double emax = lowp_decode_f64(ef, lowp_format_max_code(ef));
    double smin = has ? lowp_decode_f64(sf, f == LOWP_NVFP4 ? 1 : 0) : 1.0; /* smallest positive scale */
    /* Each element code's value and half gap, and each scale code's value, decoded the first
     * time the code occurs (scale codes have 8 bits; element codes of up to 8 bits are
     * memoized, wider ones decoded every time). */
    double ev[256], eh[256], sv[256];
    unsigned char eknown[256] = {0}, sknown[256] = {0};
    int memo = lowp_format_bits(ef) <= 8;
    for (size_t i = 0; i < n; i++) {
        uint16_t code = lowp_block_code_at(f, codes, i);
        uint8_t sc = has ? scales[i / bs] : 0;
        if (has && !sknown[sc]) {
            sv[sc] = lowp_decode_f64(sf, sc);
            sknown[sc] = 1;
        }
        double e, h;
        if (memo && eknown[code]) {
            e = ev[code];
            h = eh[code];
        } else {
            e = lowp_decode_f64(ef, code);
            h = lowp_code_is_nan(ef, code) ? NAN : halfgap_code(ef, magnitude(ef, code));
            if (memo) {
                ev[code] = e;
                eh[code] = h;
                eknown[code] = 1;
            }
        }
        double sval = has ? sv[sc] : 1.0;
        if (sval == 0.0) /* the block amax rounded to a zero scale: |x| <= M smin g (1 + eps) */
            delta[i] = emax * smin * (double)dec * (1 + EPS_RECIPE);
        else /* a NaN element (NaN half gap) or scale: bound_of gives Inf */
            delta[i] = bound_of(e, h, sval * (double)dec);
    }
}

int lowp_qsa_score_bounds(const lowp_qsa_config *c, const float *qo, const double *kb, const double *kdelta,
                          size_t seq_len, size_t pos, const float *scores, double *bounds, char *why, size_t wl)
{
    if (c == NULL || c->head_dim < 1 || c->ratio < 1 || c->index_heads < 1)
        return lowp_why_set(why, wl, "QSA bounds: bad configuration");
    if (pos >= seq_len)
        return lowp_why_set(why, wl, "QSA bounds: query position %zu outside the sequence of %zu tokens", pos,
                            seq_len);
    size_t d = c->head_dim, R = c->ratio, H = c->index_heads;
    size_t vis = (pos + 1) / R < seq_len / R ? (pos + 1) / R : seq_len / R;
    double *dq = calloc(H * d, sizeof *dq);
    if (dq == NULL)
        return lowp_why_set(why, wl, "QSA bounds: out of memory");
    if (c->keys == LOWP_QSA_KEYS_E4M3) /* q cast to E4M3 (unit scale) from its BF16 value */
        for (size_t i = 0; i < H * d; i++)
            dq[i] = lowp_select_elem_bound(LOWP_E4M3, (double)qo[i], 1.0);
    double div = c->divide ? (double)sqrtf((float)d) : 1.0, gd = gamma_n(d - 1), gh = gamma_n(H - 1);
    for (size_t b = 0; b < vis; b++) {
        const double *kv = kb + b * d, *dk = kdelta ? kdelta + b * d : NULL;
        double esum = 0.0, T = 0.0;
        for (size_t h = 0; h < H; h++) {
            const float *qh = qo + h * d;
            const double *dqh = dq + h * d;
            double A = 0.0, P = 0.0, s = 0.0;
            for (size_t i = 0; i < d; i++) {
                double dki = dk ? dk[i] : 0.0;
                A += fabs((double)qh[i]) * dki + dqh[i] * (fabs(kv[i]) + dki);
                P += fabs((double)qh[i] * kv[i]);
                s += (double)qh[i] * kv[i];
            }
            float D = (float)s; /* the binary32 dot lowp_qsa_scores formed */
            esum += A + gd * P + r32(D);
            T += D > 0 ? (double)D : 0.0;
        }
        double Sc = (double)(float)T;
        bounds[b] = ((esum + gh * T + r32(Sc)) / div + r32(scores[b])) * INFLATE;
    }
    free(dq);
    return 0;
}

/* Block i's key for KV head g as lowp_blocksel_scores forms it, kbar[0..d), and eps[0..d)
 * its bound against the exact mean of the unquantized keys (lowp/select.h, MoBA). */
static void block_key_bound(const lowp_blocksel_config *c, const lowp_codec *b16, const float *k, const double *kdsum,
                            size_t seq_len, size_t i, size_t g, float *kbar, double *eps)
{
    size_t B = c->block, d = c->head_dim, Hk = c->kv_heads;
    size_t t0 = i * B, t1 = t0 + B < seq_len ? t0 + B : seq_len, n = t1 - t0;
    double gn = gamma_n(n - 1);
    for (size_t e = 0; e < d; e++) {
        double S = 0.0, A = 0.0, D = kdsum ? kdsum[(i * Hk + g) * d + e] : 0.0;
        for (size_t t = t0; t < t1; t++) {
            size_t at = (t * Hk + g) * d + e;
            S += (double)k[at];
            A += fabs((double)k[at]);
        }
        float s32 = (float)S, m = s32 / (float)n;
        float kb = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(b16, m));
        kbar[e] = kb;
        eps[e] = r16(kb) + r32(m) + (r32(s32) + gn * A + D) / (double)n;
    }
}

/* MoBA's bound of the fp32 dot D = dot(q_h, kbar) against q_h . (exact mean), before the
 * score's own rounding: sum_c |q_c| eps_c + gamma_{d-1} sum_c |q_c kb_c| */
static double dot_bound(const float *qh, const float *kbar, const double *eps, size_t d)
{
    double E = 0.0, P = 0.0;
    for (size_t e = 0; e < d; e++) {
        E += fabs((double)qh[e]) * eps[e];
        P += fabs((double)qh[e] * kbar[e]);
    }
    return E + gamma_n(d - 1) * P;
}

/* The checks of MoBA's and NSA's bounds, and the BF16 codec of their block keys */
static int blocksel_bound_check(const lowp_blocksel_config *c, lowp_blocksel_method want, size_t seq_len, size_t pos,
                                lowp_codec *b16, char *why, size_t wl)
{
    const char *name = want == LOWP_BLOCKSEL_MOBA ? "MoBA" : "NSA";
    if (c == NULL || c->method != want)
        return lowp_why_set(why, wl, "%s bounds: a %s configuration", name,
                            c == NULL ? "NULL" : c->method == LOWP_BLOCKSEL_MOBA ? "MoBA" : "NSA");
    if (c->kv_heads < 1 || c->q_heads % c->kv_heads || c->block < 1 || c->head_dim < 1)
        return lowp_why_set(why, wl, "%s bounds: bad configuration", name);
    if (pos >= seq_len)
        return lowp_why_set(why, wl, "%s bounds: query position %zu outside the sequence of %zu tokens", name, pos,
                            seq_len);
    return lowp_codec_init(b16, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl);
}

int lowp_moba_score_bounds(const lowp_blocksel_config *c, const float *q, const float *k, const double *kdsum,
                           size_t seq_len, size_t pos, const float *scores, double *bounds, char *why, size_t wl)
{
    lowp_codec b16;
    if (blocksel_bound_check(c, LOWP_BLOCKSEL_MOBA, seq_len, pos, &b16, why, wl))
        return -1;
    size_t B = c->block, d = c->head_dim, Hk = c->kv_heads, G = c->q_heads / Hk, cur = pos / B, nb = cur + 1;
    double *eps = malloc(d * sizeof *eps);
    float *kbar = malloc(d * sizeof *kbar);
    if (eps == NULL || kbar == NULL) {
        free(eps);
        free(kbar);
        return lowp_why_set(why, wl, "MoBA bounds: out of memory");
    }
    for (size_t i = 0; i < c->q_heads * nb; i++)
        bounds[i] = 0.0;
    for (size_t i = 0; i < cur; i++)
        for (size_t g = 0; g < Hk; g++) {
            block_key_bound(c, &b16, k, kdsum, seq_len, i, g, kbar, eps);
            for (size_t h = g * G; h < (g + 1) * G; h++)
                bounds[h * nb + i] = (dot_bound(q + h * d, kbar, eps, d) + r32(scores[h * nb + i])) * INFLATE;
        }
    free(eps);
    free(kbar);
    return 0;
}

/* The C library's exp and log: within 2 ulp (glibc documents at most 1 on x86_64 and
 * aarch64), so exp's relative error and log's relative error are at most 2^-51. */
#define LIBM_REL 0x1p-51

int lowp_nsa_score_bounds(const lowp_blocksel_config *c, const float *q, const float *k, const double *kdsum,
                          size_t seq_len, size_t pos, const float *scores, double *bounds, char *why, size_t wl)
{
    lowp_codec b16;
    if (blocksel_bound_check(c, LOWP_BLOCKSEL_NSA, seq_len, pos, &b16, why, wl))
        return -1;
    size_t B = c->block, d = c->head_dim, Hk = c->kv_heads, G = c->q_heads / Hk, cur = pos / B, nb = cur + 1;
    size_t nc = (pos + 1) / B; /* the softmax's support; nc >= cur, so every unforced block is in it */
    /* per KV head: the block keys and their bounds; per head: logits and their bounds; per
     * block: the group's summed error bounds and probabilities */
    double *keps = malloc((nc * d + 2 * nb + nc + 1) * sizeof *keps);
    float *kbar = malloc((nc * d + nc + 1) * sizeof *kbar);
    if (keps == NULL || kbar == NULL) {
        free(keps);
        free(kbar);
        return lowp_why_set(why, wl, "NSA bounds: out of memory for %zu blocks", nc);
    }
    double *perr = keps + nc * d, *psum = perr + nb, *lb = psum + nb;
    float *sv = kbar + nc * d;
    float sm = (float)(1.0 / sqrt((double)d));
    double ec = 0x1p-23 * (double)sm; /* >= |sm - d^-0.5| (2^-24 + 2^-51 relative) */
    double gG = gamma_n(G - 1), gnc = gamma_n(nc ? nc - 1 : 0);
    for (size_t i = 0; i < Hk * nb; i++)
        bounds[i] = 0.0;
    for (size_t g = 0; g < Hk; g++) {
        for (size_t i = 0; i < nc; i++)
            block_key_bound(c, &b16, k, kdsum, seq_len, i, g, kbar + i * d, keps + i * d);
        for (size_t i = 0; i < nb; i++)
            perr[i] = psum[i] = 0.0;
        for (size_t h = g * G; h < (g + 1) * G; h++) {
            /* the logits as lowp_blocksel_scores forms them, and b_i >= |s_i - s*_i| */
            double Bmax = 0.0, m = -INFINITY, sum = 0.0;
            for (size_t i = 0; i < nc; i++) {
                float D = lowp_select_dot(q + h * d, kbar + i * d, d);
                sv[i] = D * sm;
                lb[i] = ((double)sm + ec) * (dot_bound(q + h * d, kbar + i * d, keps + i * d, d) + r32(D)) +
                        fabs((double)D) * ec + r32(sv[i]);
                Bmax = lb[i] > Bmax ? lb[i] : Bmax;
                m = (double)sv[i] > m ? (double)sv[i] : m;
            }
            for (size_t i = 0; i < nc; i++)
                sum += exp((double)sv[i] - m);
            double ls = log(sum), lse = nc ? m + ls : 0.0;
            /* eL >= |lse - log sum_i exp(s_i)|: each term's argument rounding (2^-53 |x|, |x| <=
             * 746 where the term is not below 2^-1074) and exp (2^-51) within mu = 2^-42
             * relative, plus 2^-1073 absolute (sum >= 1: the largest term is exp(0) = 1); the
             * sum's gamma_{nc-1}; log's 2^-51 |ls|; the addition's 2^-53 |lse| */
            double rel = 0x1p-42 + gnc + (double)nc * 0x1p-1073;
            double eL = 1.01 * rel + LIBM_REL * fabs(ls) + 0x1p-52 * fabs(lse);
            for (size_t i = 0; i < cur && i < nc; i++) {
                double a = (double)sv[i] - lse, pd = exp(a);
                float p = (float)pd;
                /* exp(a) is within e^{+-Delta} of the exact p*_i (the lse moves by <= Bmax);
                 * |pd - exp(a)| <= 2^-51 exp(a) + 2^-1073 */
                double Delta = lb[i] + Bmax + eL + 0x1p-52 * fabs(a);
                double Ea = ((double)pd + 0x1p-1073) * (1 + 0x1p-50); /* >= exp(a) */
                perr[i] += Ea * (expm1(Delta) + LIBM_REL) + 0x1p-1073 + r32(p);
                psum[i] += (double)p;
            }
        }
        for (size_t i = 0; i < cur && i < nc; i++) {
            float o = scores[g * nb + i];
            double b = (perr[i] + gG * psum[i] + r32(o)) * INFLATE;
            bounds[g * nb + i] = isinf(o) ? 0.0 : isnan(b) ? INFINITY : b; /* NaN inputs certify nothing */
        }
    }
    free(keps);
    free(kbar);
    return 0;
}

int lowp_dsa_score_bounds(const lowp_dsa_config *c, const float *q, const float *w, const float *kq, const float *ks,
                          const double *kdelta, size_t seq_len, size_t pos, const float *scores, double *bounds,
                          char *why, size_t wl)
{
    if (c == NULL || c->heads < 1 || c->head_dim < 1)
        return lowp_why_set(why, wl, "DSA bounds: bad configuration");
    if (pos >= seq_len)
        return lowp_why_set(why, wl, "DSA bounds: query position %zu outside the sequence of %zu tokens", pos,
                            seq_len);
    size_t H = c->heads, d = c->head_dim, vis = pos + 1;
    float *qq = malloc((H * d + 3 * H) * sizeof *qq);
    double *dq = calloc(H * d + 1, sizeof *dq);
    if (qq == NULL || dq == NULL) {
        free(qq);
        free(dq);
        return lowp_why_set(why, wl, "DSA bounds: out of memory");
    }
    float *qs = qq + H * d, *wb = qs + H, *wh = wb + H, dscale;
    if (lowp_dsa_query(c, q, w, qq, qs, wb, wh, &dscale, why, wl)) {
        free(qq);
        free(dq);
        return -1;
    }
    if (c->keys != LOWP_DSA_KEYS_BF16) /* q's E4M3 codes at its per-head scale */
        for (size_t i = 0; i < H * d; i++)
            dq[i] = lowp_select_elem_bound(LOWP_E4M3, (double)qq[i], (double)qs[i / d]);
    double gd = gamma_n(d - 1), gh = gamma_n(H - 1);
    for (size_t n = 0; n < vis; n++) {
        const float *kn = kq + n * d;
        const double *dk = kdelta ? kdelta + n * d : NULL;
        double kss = (double)ks[n], err = 0.0, labs = 0.0, hs = 0.0;
        for (size_t h = 0; h < H; h++) {
            const float *qh = qq + h * d;
            const double *dqh = dq + h * d;
            double qsh = (double)qs[h], A = 0.0, P = 0.0, s = 0.0;
            for (size_t i = 0; i < d; i++) {
                double dki = dk ? dk[i] : 0.0, xh = (double)qh[i] * qsh, kh = (double)kn[i] * kss;
                A += fabs(xh) * dki + dqh[i] * (fabs(kh) + dki);
                P += fabs((double)qh[i] * (double)kn[i]);
                s += (double)qh[i] * (double)kn[i];
            }
            float D = (float)s; /* lowp_select_dot's value */
            double relu = D > 0 ? (double)D : 0.0;
            double E = kss * qsh * (gd * P + r32(D)) + A;   /* >= |ks qs D - q.k| */
            float t1 = wb[h] * qs[h], l = (float)relu * wh[h];
            double ew = r32(wh[h]) + (double)dscale * r32(t1); /* >= |wh - wb qs dscale| */
            err += kss * relu * ew + fabs((double)wb[h]) * (double)dscale * E + kss * r32(l);
            labs += fabs((double)l);
            hs += (double)l;
        }
        double Sc = (double)(float)hs, b = err + kss * (gh * labs + r32(Sc)) + r32(scores[n]);
        bounds[n] = isnan(b) ? INFINITY : b * INFLATE;
    }
    free(qq);
    free(dq);
    return 0;
}

int lowp_select_certified(const float *scores, const double *bounds, size_t n, const int32_t *sel, size_t nsel)
{
    unsigned char *in = calloc(n ? n : 1, 1);
    if (in == NULL)
        return 0;
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < nsel; i++)
        if (sel[i] >= 0 && (size_t)sel[i] < n) {
            in[sel[i]] = 1;
            float s = scores[sel[i]];
            if (isfinite(s) && (double)s - bounds[sel[i]] < lo)
                lo = (double)s - bounds[sel[i]];
        }
    for (size_t j = 0; j < n; j++)
        if (!in[j] && isfinite(scores[j]) && (double)scores[j] + bounds[j] > hi)
            hi = (double)scores[j] + bounds[j];
    free(in);
    return lo > hi || hi == -INFINITY || lo == INFINITY;
}
