/* ref/model/src/model_eval.c: per-token metrics and the block bootstrap (lowp/model_eval.h). */
#include "lowp/model_eval.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/cases.h"
#include "lowp/why.h"

size_t lowp_eval_argmax(const float *z, size_t n)
{
    size_t best = 0;
    for (size_t j = 1; j < n; j++)
        if (z[j] > z[best] || (isnan(z[best]) && !isnan(z[j])))
            best = j;
    return best;
}

size_t lowp_eval_agree_len(const int32_t *a, const int32_t *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i])
        i++;
    return i;
}

/* log sum exp(z - max) and the max, in binary64. */
static double log_norm(const float *z, size_t n, double *mx)
{
    double m = -INFINITY, s = 0.0;
    for (size_t j = 0; j < n; j++)
        m = z[j] > m ? z[j] : m;
    for (size_t j = 0; j < n; j++)
        s += exp((double)z[j] - m);
    *mx = m;
    return log(s);
}

lowp_eval_token lowp_eval_token_stats(const float *z_ref, const float *z, size_t n_vocab, int32_t target)
{
    lowp_eval_token t;
    double mr, m, lr = log_norm(z_ref, n_vocab, &mr), l = log_norm(z, n_vocab, &m);
    t.nll_ref = mr + lr - (double)z_ref[target];
    t.nll = m + l - (double)z[target];
    double kl = 0.0;
    for (size_t j = 0; j < n_vocab; j++) {
        double a = (double)z_ref[j] - mr - lr, b = (double)z[j] - m - l; /* log p_ref, log p */
        kl += exp(a) * (a - b);
    }
    t.kl = kl;
    t.top1 = lowp_eval_argmax(z_ref, n_vocab) == lowp_eval_argmax(z, n_vocab);
    return t;
}

const char *lowp_eval_stat_name(lowp_eval_stat s)
{
    static const char *const names[LOWP_EVAL_STAT_COUNT] = {"ppl", "ppl_ref", "dppl", "kl", "top1"};
    return (unsigned)s < LOWP_EVAL_STAT_COUNT ? names[s] : "?";
}

double lowp_eval_stat_of(lowp_eval_stat s, const double means[LOWP_EVAL_COLS])
{
    switch (s) {
    case LOWP_EVAL_PPL:
        return exp(means[LOWP_EVAL_NLL]);
    case LOWP_EVAL_PPL_REF:
        return exp(means[LOWP_EVAL_NLL_REF]);
    case LOWP_EVAL_DPPL:
        return exp(means[LOWP_EVAL_NLL]) - exp(means[LOWP_EVAL_NLL_REF]);
    case LOWP_EVAL_MEAN_KL:
        return means[LOWP_EVAL_KL];
    case LOWP_EVAL_TOP1_AGREE:
        return means[LOWP_EVAL_TOP1];
    }
    return NAN;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A uniform index in [0, n): the top 53 bits of a splitmix64 draw as a fraction of 1,
 * times n (bias below n / 2^53, far below any interval's resolution here). */
static size_t draw(uint64_t *st, size_t n)
{
    size_t i = (size_t)((double)(lowp_splitmix64(st) >> 11) * 0x1p-53 * (double)n);
    return i < n ? i : n - 1;
}

/* The nearest-rank percentile interval of sorted r[0 .. reps). */
static void interval(double *r, size_t reps, lowp_eval_ci *out)
{
    qsort(r, reps, sizeof *r, cmp_double);
    size_t lo = (size_t)ceil(0.025 * (double)reps), hi = (size_t)ceil(0.975 * (double)reps);
    out->lo = r[(lo ? lo : 1) - 1];
    out->hi = r[(hi ? hi : 1) - 1];
}

static void token_cols(const lowp_eval_token *t, double c[LOWP_EVAL_COLS])
{
    c[LOWP_EVAL_NLL_REF] = t->nll_ref;
    c[LOWP_EVAL_NLL] = t->nll;
    c[LOWP_EVAL_KL] = t->kl;
    c[LOWP_EVAL_TOP1] = t->top1;
}

int lowp_eval_bootstrap(const lowp_eval_token *t, size_t n, size_t block, size_t reps, uint64_t seed,
                        lowp_eval_ci *out, char *why, size_t why_len)
{
    if (n == 0)
        return lowp_why_set(why, why_len, "no tokens to evaluate");
    if (block == 0)
        block = 1;
    size_t nb = (n + block - 1) / block;
    double *bsum = calloc(nb * LOWP_EVAL_COLS, sizeof *bsum), *r = malloc((reps ? reps : 1) * sizeof *r);
    double *rm = malloc((reps ? reps : 1) * LOWP_EVAL_COLS * sizeof *rm);
    if (bsum == NULL || r == NULL || rm == NULL) {
        free(bsum);
        free(r);
        free(rm);
        return lowp_why_set(why, why_len, "out of memory for the bootstrap of %zu tokens", n);
    }
    double all[LOWP_EVAL_COLS] = {0};
    for (size_t i = 0; i < n; i++) {
        double c[LOWP_EVAL_COLS];
        token_cols(&t[i], c);
        for (int k = 0; k < LOWP_EVAL_COLS; k++) {
            bsum[(i / block) * LOWP_EVAL_COLS + k] += c[k];
            all[k] += c[k];
        }
    }
    for (int k = 0; k < LOWP_EVAL_COLS; k++)
        all[k] /= (double)n;
    uint64_t st = seed;
    for (size_t b = 0; b < reps; b++) {
        double s[LOWP_EVAL_COLS] = {0};
        size_t cnt = 0;
        for (size_t j = 0; j < nb; j++) {
            size_t pick = draw(&st, nb);
            for (int k = 0; k < LOWP_EVAL_COLS; k++)
                s[k] += bsum[pick * LOWP_EVAL_COLS + k];
            cnt += pick + 1 < nb ? block : n - (nb - 1) * block;
        }
        for (int k = 0; k < LOWP_EVAL_COLS; k++)
            rm[b * LOWP_EVAL_COLS + k] = s[k] / (double)cnt;
    }
    for (int s = 0; s < LOWP_EVAL_STAT_COUNT; s++) {
        out[s].est = out[s].lo = out[s].hi = lowp_eval_stat_of((lowp_eval_stat)s, all);
        if (reps == 0)
            continue;
        for (size_t b = 0; b < reps; b++)
            r[b] = lowp_eval_stat_of((lowp_eval_stat)s, rm + b * LOWP_EVAL_COLS);
        interval(r, reps, &out[s]);
    }
    free(bsum);
    free(r);
    free(rm);
    return 0;
}

int lowp_eval_bootstrap_mean(const double *x, size_t n, size_t reps, uint64_t seed, lowp_eval_ci *out, char *why,
                             size_t why_len)
{
    if (n == 0)
        return lowp_why_set(why, why_len, "no values to average");
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    out->est = out->lo = out->hi = s / (double)n;
    if (reps == 0)
        return 0;
    double *r = malloc(reps * sizeof *r);
    if (r == NULL)
        return lowp_why_set(why, why_len, "out of memory for the bootstrap of %zu values", n);
    uint64_t st = seed;
    for (size_t b = 0; b < reps; b++) {
        double m = 0.0;
        for (size_t j = 0; j < n; j++)
            m += x[draw(&st, n)];
        r[b] = m / (double)n;
    }
    interval(r, reps, out);
    free(r);
    return 0;
}
