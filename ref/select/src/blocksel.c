/* ref/select/src/blocksel.c: MoBA and NSA-style block selection from the main keys
 * (lowp/select.h gives the definitions; ref/notes/selection.md 3 the sources). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp/why.h"

size_t lowp_blocksel_units(const lowp_blocksel_config *c)
{
    return c->method == LOWP_BLOCKSEL_MOBA ? c->q_heads : c->kv_heads;
}

static int check_config(const lowp_blocksel_config *c, char *why, size_t wl)
{
    if (c == NULL)
        return lowp_why_set(why, wl, "block selection: NULL configuration");
    if ((unsigned)c->method > LOWP_BLOCKSEL_NSA)
        return lowp_why_set(why, wl, "block selection: unknown method %d", (int)c->method);
    if (c->kv_heads < 1 || c->q_heads < c->kv_heads || c->q_heads % c->kv_heads || c->q_heads > 1024)
        return lowp_why_set(why, wl, "block selection: %zu query heads over %zu KV heads (a multiple, 1..1024)",
                            c->q_heads, c->kv_heads);
    if (c->head_dim < 1 || c->head_dim > 1024)
        return lowp_why_set(why, wl, "block selection: head dim %zu (1..1024)", c->head_dim);
    if (c->block < 1 || c->block > ((size_t)1 << 20))
        return lowp_why_set(why, wl, "block selection: block of %zu tokens (1..2^20)", c->block);
    if (c->topk < 1)
        return lowp_why_set(why, wl, "block selection: top-k 0");
    if (c->local_blocks < 1)
        return lowp_why_set(why, wl, "block selection: local blocks 0 (the current block is always kept)");
    return 0;
}

int lowp_blocksel_scores(const lowp_blocksel_config *c, const float *q, const float *k, size_t seq_len,
                         size_t pos, float *scores, size_t *nblocks, char *why, size_t wl)
{
    *nblocks = 0;
    if (check_config(c, why, wl))
        return -1;
    if (pos >= seq_len)
        return lowp_why_set(why, wl, "block selection: query position %zu outside the sequence of %zu tokens",
                            pos, seq_len);
    lowp_codec b16;
    if (lowp_codec_init(&b16, LOWP_BF16, LOWP_PROFILE_TORCH, LOWP_RN, 0, why, wl))
        return -1;
    size_t B = c->block, d = c->head_dim, Hk = c->kv_heads, G = c->q_heads / Hk;
    size_t cur = pos / B, nb = cur + 1;
    /* block keys of the blocks up to the current one: kbar[i][g][d] */
    float *kbar = malloc(nb * Hk * d * sizeof *kbar);
    double *p = malloc(nb * sizeof *p);
    if (kbar == NULL || p == NULL) {
        free(kbar);
        free(p);
        return lowp_why_set(why, wl, "block selection: out of memory for %zu blocks", nb);
    }
    for (size_t i = 0; i < nb; i++) {
        size_t t0 = i * B, t1 = t0 + B < seq_len ? t0 + B : seq_len;
        for (size_t g = 0; g < Hk; g++)
            for (size_t e = 0; e < d; e++) {
                double s = 0.0; /* torch's mean: the open-order sum, rounded once */
                for (size_t t = t0; t < t1; t++)
                    s += (double)k[(t * Hk + g) * d + e];
                kbar[(i * Hk + g) * d + e] = lowp_decode_f32(LOWP_BF16, lowp_encode_f32(&b16, (float)s / (float)(t1 - t0)));
            }
    }
    size_t units = lowp_blocksel_units(c);
    if (c->method == LOWP_BLOCKSEL_MOBA) {
        for (size_t h = 0; h < units; h++) {
            size_t g = h / G;
            float *o = scores + h * nb;
            for (size_t i = 0; i < cur; i++)
                o[i] = lowp_select_dot(q + h * d, kbar + (i * Hk + g) * d, d);
            o[cur] = INFINITY;
        }
    } else {
        size_t nc = (pos + 1) / B; /* complete blocks: the softmax's support */
        float sm = (float)(1.0 / sqrt((double)d));
        for (size_t g = 0; g < units; g++) {
            double *acc = p;
            for (size_t i = 0; i < nb; i++)
                acc[i] = 0.0;
            for (size_t hh = 0; hh < G; hh++) {
                size_t h = g * G + hh;
                float *sv = scores + g * nb; /* scratch: this head's logits */
                double m = -INFINITY, sum = 0.0;
                for (size_t i = 0; i < nc; i++) {
                    sv[i] = lowp_select_dot(q + h * d, kbar + (i * Hk + g) * d, d) * sm;
                    m = (double)sv[i] > m ? (double)sv[i] : m;
                }
                for (size_t i = 0; i < nc; i++)
                    sum += exp((double)sv[i] - m);
                double lse = nc ? m + log(sum) : 0.0;
                for (size_t i = 0; i < cur && i < nc; i++)
                    acc[i] += (double)(float)exp((double)sv[i] - lse);
            }
            float *o = scores + g * nb;
            for (size_t i = 0; i < nb; i++)
                o[i] = (float)acc[i];
            for (size_t i = 0; i < c->sink_blocks && i < nb; i++)
                o[i] = INFINITY;
            for (size_t j = 0; j < c->local_blocks && j <= cur; j++)
                o[cur - j] = INFINITY;
        }
    }
    free(kbar);
    free(p);
    *nblocks = nb;
    return 0;
}
