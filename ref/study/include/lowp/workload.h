/* lowp/workload.h: seeded attention workloads (Q, K, V) for error studies.
 *
 * Shapes are lowp/attn.h's: q [q_len][num_q_heads][qk_dim], k [ctx][num_kv_heads][qk_dim],
 * v [ctx][num_kv_heads][vo_dim], binary32, row-major. Query token i sits at position
 * q_offset + i. Every workload is a pure function of (kind, seed, shape): the same floats
 * for any OpenMP thread count (the random draws come from lowp_gen, lowp/gen.h, and from
 * lowp_splitmix64 streams whose state depends only on the seed and a tag).
 *
 * The kinds (D = qk_dim; N(0, 1) draws are independent; "whitened" is defined below):
 *
 *   gaussian    q, k, v ~ N(0, 1) elementwise. With sm_scale 1/sqrt(D) the scores of
 *               one query are ~N(0, |q|^2 / D) ~ N(0, 1): a flat softmax, every key
 *               matters a little (the error of a long context averages over many keys).
 *
 *   k-outlier   k = lowp_gen k-like with RoPE off (pre-RoPE keys: per-channel offsets
 *               and spreads, 4 massive channels per head of magnitude 20..200, constant
 *               up to 20% over tokens); v = lowp_gen v-like; q whitened (a = 0).
 *
 *   rope        the k-outlier keys rotated by RoPE at their positions t (rotate-half
 *               pairs (i, i + D/2), theta = pos * 10000^(-2i/D), as lowp/gen.h states);
 *               q whitened with mean alignment a = 1 (below), then rotated at its own
 *               position q_offset + i. Scores then depend on the relative position: the
 *               mean-aligned part is sum_i |q_i| |m_i| cos((pos_q - t) theta_i + phi_i),
 *               the locality / recency structure of real RoPE attention. v = v-like.
 *
 *   needle      k, v ~ N(0, 1); per KV head g a random unit direction u_g and one needle
 *               position n_g, uniform in [0, q_offset] (visible to every query token);
 *               every query head of group g is q = sqrt(D) u_g + N(0, I); the needle key
 *               is k[n_g] = GAIN u_g + 0.1 N(0, I) (GAIN = LOWP_WORKLOAD_NEEDLE_GAIN), with
 *               elements of about the haystack's magnitude (GAIN / sqrt(D) ~ 1.1 at D 128).
 *               At sm_scale 1/sqrt(D) its score is GAIN +- GAIN/sqrt(D), the others'
 *               ~N(0, 2): the haystack's log-sum-exp is about ln(ctx) + 1, so the needle
 *               holds nearly all the mass at 1K tokens and about three quarters at 128K
 *               (one key strongly aligned with the query among many).
 *
 *   small       the gaussian workload with K and V scaled by 2^-8 and Q by 2^8 (exact in
 *               binary32): the same scores, outputs 2^-8 as large. A low-magnitude layer:
 *               NVFP4 block scales (block amax / 6, about 2^-9..2^-7 here) fall into the E4M3
 *               subnormals at global scale 1.0, and FP8 at scale 1.0 codes K and V in its
 *               subnormal range (local-inference-lab/b12x #86; ref/notes/kernels.md section 6 #5).
 *
 * Whitened queries: for each KV head g and channel c, m_gc is the mean of the pre-RoPE
 * k[:, g, c] over the ctx tokens and r_gc the root mean square over the tokens and the
 * rotary pair (c, c + D/2) (binary64; one r per pair, so the whitening commutes with the
 * rotation); a query head of group g draws z ~ N(0, I) and takes
 *         q_c = (z_c + a * sqrt(D) * u_gc) / r_gc,   u_g = (m_g / r_g) / ||m_g / r_g||
 * so that every key pair contributes comparably to the score variance over tokens:
 * a massive channel, nearly constant over tokens, then acts as a near-constant score
 * bias (the attention-sink mechanism of trained models) instead of a huge random term.
 * The outlier channels still set the block scales, which is what the formats must survive.
 */
#ifndef LOWP_WORKLOAD_H
#define LOWP_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "lowp/attn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_workload_kind {
    LOWP_WL_GAUSSIAN = 0,
    LOWP_WL_K_OUTLIER = 1,
    LOWP_WL_ROPE = 2,
    LOWP_WL_NEEDLE = 3,
    LOWP_WL_SMALL = 4
} lowp_workload_kind;
#define LOWP_WORKLOAD_KIND_COUNT 5

#define LOWP_WORKLOAD_NEEDLE_GAIN 13.0 /* the needle's expected score at sm_scale 1/sqrt(D) */

/* Names "gaussian" "k-outlier" "rope" "needle" "small"; the parser returns 0 or -1. */
const char *lowp_workload_name(lowp_workload_kind k);
int lowp_workload_parse(const char *name, lowp_workload_kind *out);

typedef struct lowp_workload {
    lowp_attn_shape shape; /* as given, sm_scale filled in by lowp_attn_check_shape */
    float *q, *k, *v;      /* owned */
    size_t *needle;        /* needle kind: [num_kv_heads] positions; else NULL */
} lowp_workload;

/* Generate a workload of the given shape (q_offset + q_len <= ctx; qk_dim even for the
 * k-outlier and rope kinds, which share lowp_gen's k-like requirement). On success *w owns
 * its arrays (free with lowp_workload_free). Returns 0, or -1 with a one-sentence reason
 * (bad shape, out of memory); *w is then empty. */
int lowp_workload_make(lowp_workload_kind kind, uint64_t seed, const lowp_attn_shape *s,
                       lowp_workload *w, char *why, size_t why_len);
void lowp_workload_free(lowp_workload *w); /* NULL-safe, idempotent */

#ifdef __cplusplus
}
#endif
#endif /* LOWP_WORKLOAD_H */
