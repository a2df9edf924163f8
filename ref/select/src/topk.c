/* ref/select/src/topk.c: the deterministic top-k, the drift of one selection against
 * another, and the dot-product rule (lowp/select.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/select.h"
#include "lowp/why.h"

int lowp_topk_better(const float *s, int32_t a, int32_t b)
{
    /* -0 == +0, so they tie and the index decides; NaN never reaches here */
    return s[a] > s[b] || (s[a] == s[b] && a < b);
}

/* A binary min-heap of indices whose root is the worst of the kept ones. */
static void sift_down(const float *s, int32_t *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && lowp_topk_better(s, h[w], h[l]))
            w = l;
        if (r < n && lowp_topk_better(s, h[w], h[r]))
            w = r;
        if (w == i)
            return;
        int32_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

int lowp_topk(const float *scores, size_t n, size_t k, int32_t *idx, size_t *count, char *why,
              size_t wl)
{
    if (count != NULL)
        *count = 0;
    if (n >= (size_t)INT32_MAX)
        return lowp_why_set(why, wl, "top-k over %zu scores: at most 2^31 - 1", n);
    if (k > 0 && (scores == NULL || idx == NULL))
        return lowp_why_set(why, wl, "top-k: NULL scores or output");
    for (size_t i = 0; i < n; i++)
        if (isnan(scores[i]))
            return lowp_why_set(why, wl, "score %zu is NaN: a selection over NaN scores is undefined", i);
    /* heap of the best min(k, finite) seen so far; its root is the worst kept */
    size_t m = 0;
    for (size_t i = 0; i < n && k > 0; i++) {
        if (scores[i] == -INFINITY)
            continue;
        int32_t j = (int32_t)i;
        if (m < k) {
            idx[m++] = j;
            for (size_t c = m - 1; c > 0;) { /* sift up */
                size_t p = (c - 1) / 2;
                if (!lowp_topk_better(scores, idx[p], idx[c]))
                    break;
                int32_t t = idx[p];
                idx[p] = idx[c];
                idx[c] = t;
                c = p;
            }
        } else if (lowp_topk_better(scores, j, idx[0])) {
            idx[0] = j;
            sift_down(scores, idx, m, 0);
        }
    }
    /* heap sort: pop the worst to the end, so idx[0..m) ends best first */
    for (size_t e = m; e > 1; e--) {
        int32_t t = idx[0];
        idx[0] = idx[e - 1];
        idx[e - 1] = t;
        sift_down(scores, idx, e - 1, 0);
    }
    for (size_t i = m; i < k; i++)
        idx[i] = -1;
    if (count != NULL)
        *count = m;
    return 0;
}

int lowp_select_contains(const int32_t *sel, size_t n, int32_t b)
{
    for (size_t i = 0; i < n; i++)
        if (sel[i] == b)
            return 1;
    return 0;
}

/* marks[i] |= bit for every index of sel; refuses out-of-range and repeated ones */
static int mark(unsigned char *marks, const int32_t *sel, size_t ns, size_t n, unsigned char bit,
                const char *what, char *why, size_t wl)
{
    for (size_t i = 0; i < ns; i++) {
        if (sel[i] < 0 || (size_t)sel[i] >= n)
            return lowp_why_set(why, wl, "%s selection: index %d at %zu is outside [0, %zu)", what,
                                (int)sel[i], i, n);
        if (marks[sel[i]] & bit)
            return lowp_why_set(why, wl, "%s selection: index %d appears twice", what, (int)sel[i]);
        marks[sel[i]] |= bit;
    }
    return 0;
}

/* an entry of the reference order: the tie rule as a total order (higher score first, an
 * exact tie to the smaller index; -0 and +0 compare equal; NaN was refused before) */
typedef struct ranked {
    float s;
    int32_t i;
} ranked;

static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->s != b->s)
        return a->s > b->s ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

int lowp_select_drift_of(const int32_t *ref, size_t n_ref, const int32_t *got, size_t n_got,
                         const float *ref_scores, size_t n, lowp_select_drift *d, char *why,
                         size_t wl)
{
    memset(d, 0, sizeof *d);
    if (n >= (size_t)INT32_MAX)
        return lowp_why_set(why, wl, "drift over %zu blocks: at most 2^31 - 1", n);
    unsigned char *marks = calloc(n ? n : 1, 1);
    if (marks == NULL)
        return lowp_why_set(why, wl, "out of memory for %zu block marks", n);
    int rc = mark(marks, ref, n_ref, n, 1, "reference", why, wl);
    if (rc == 0)
        rc = mark(marks, got, n_got, n, 2, "compared", why, wl);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (isnan(ref_scores[i]))
            rc = lowp_why_set(why, wl, "reference score %zu is NaN", i);
    if (rc) {
        free(marks);
        return rc;
    }
    d->n_ref = n_ref;
    d->n_got = n_got;
    for (size_t i = 0; i < n_got; i++)
        d->common += marks[got[i]] == 3;
    d->lost = n_ref - d->common;
    d->intruders = n_got - d->common;
    size_t uni = n_ref + n_got - d->common;
    d->jaccard = uni ? (double)d->common / (double)uni : 1.0;
    d->recall = n_ref ? (double)d->common / (double)n_ref : 1.0;
    /* an intruder's rank: how many blocks the reference scores put before it, i.e. its
     * position in the reference order, from one sort (O(n log n), not O(n) per intruder) */
    double sum = 0;
    ranked *order = d->intruders ? malloc(n * sizeof *order) : NULL;
    size_t *at = d->intruders ? malloc(n * sizeof *at) : NULL;
    if (d->intruders && (order == NULL || at == NULL)) {
        free(order);
        free(at);
        free(marks);
        return lowp_why_set(why, wl, "out of memory for the reference order of %zu blocks", n);
    }
    if (d->intruders) {
        for (size_t j = 0; j < n; j++) {
            order[j].s = ref_scores[j];
            order[j].i = (int32_t)j;
        }
        qsort(order, n, sizeof *order, cmp_ranked);
        for (size_t j = 0; j < n; j++)
            at[order[j].i] = j;
    }
    for (size_t i = 0; i < n_got; i++) {
        if (marks[got[i]] == 3)
            continue;
        size_t rank = at[got[i]];
        sum += (double)rank;
        if (rank > d->max_intruder_rank)
            d->max_intruder_rank = rank;
    }
    d->mean_intruder_rank = d->intruders ? sum / (double)d->intruders : 0.0;
    free(order);
    free(at);
    free(marks);
    return 0;
}

float lowp_select_dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return (float)s;
}
