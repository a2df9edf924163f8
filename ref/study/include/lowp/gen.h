/* lowp/gen.h: seeded synthetic tensors for statistics and calibration.
 *
 * Every generator is a pure function of (kind, parameters, seed, shape): the same floats
 * for any OpenMP thread count, and on any machine whose libm gives the same log, exp,
 * sqrt, sin, cos and pow (sqrt is exact everywhere; the others are glibc's, not
 * guaranteed correctly rounded, and the final rounding to binary32 hides almost every
 * last-bit difference between libms). Randomness comes only from lowp_splitmix64
 * (lowp/cases.h); each token row (K/V) or each chunk of LOWP_GEN_CHUNK elements
 * (Gaussian, Student-t) draws from its own stream, whose state is derived from
 * (seed, stream tag, row or chunk index), so the work splits across threads freely.
 * All arithmetic is binary64; each element is rounded once to binary32 (RN) at the end.
 *
 * The models (parameters are the fields of lowp_gen_params; defaults in brackets):
 *
 *   gaussian   x = scale * z,  z ~ N(0, 1) by Box-Muller.            [scale 1]
 *              E x = 0, Var x = scale^2.
 *
 *   student-t  x = scale * z / sqrt(w / nu),  z ~ N(0, 1), w ~ chi^2(nu) = Gamma(nu/2, 2)
 *              (Marsaglia-Tsang). [scale 1, nu 4]
 *              E x = 0 (nu > 1), Var x = scale^2 nu / (nu - 2) (nu > 2); tails ~ |x|^-(nu+1).
 *
 *   k-like     Keys of one attention layer, shape [tokens T, heads H, head_dim D], D even.
 *              Fixed per (head, channel), drawn once from the seed:
 *                sigma_hc = scale * exp(channel_log_sd * g)             channel spread
 *                mu_hc    = channel_mean_sd * sigma_hc * g'             channel offset
 *              and, per head, outliers_per_head distinct "massive" channels c, chosen
 *              uniformly among the low-frequency half of the rotary pairs (pair index
 *              i in [D/4, D/2), either member of the pair), as observed in LLM keys
 *              (massive values concentrate in low-frequency RoPE dimensions), with
 *                A_hc     = scale * outlier_min * (outlier_max/outlier_min)^u,
 *                           u ~ U(0,1) (log-uniform between the two factors),
 *                sign_hc  = +-1 with equal probability.
 *              Per token t and head h: a token scale v_th = exp(token_log_sd * g_th).
 *              Pre-RoPE value:
 *                ordinary channel: k~ = mu_hc + v_th * sigma_hc * z
 *                massive channel:  k~ = sign_hc * A_hc * (1 + outlier_rel_sd * z)
 *              RoPE (if rope != 0) rotates pair (a, b) by theta = (t + pos_offset) *
 *              rope_base^(-2i/D), i = pair index 0..D/2-1:
 *                rotate-half (default, Llama/NeoX): a = i, b = i + D/2;
 *                interleaved (GPT-J):               a = 2i, b = 2i + 1;
 *                k_a = k~_a cos(theta) - k~_b sin(theta),  k_b = k~_b cos(theta) + k~_a sin(theta).
 *              The rotation preserves k_a^2 + k_b^2 per (t, h, i).
 *              [scale 1, channel_log_sd 0.5, channel_mean_sd 0.5, token_log_sd 0.1,
 *               outliers_per_head 4, outlier_min 20, outlier_max 200, outlier_rel_sd 0.2,
 *               rope 1, rope_base 10000, rope_interleaved 0, pos_offset 0]
 *
 *   v-like     Values, same shape; milder and near-Gaussian per channel:
 *                sigma_hc = scale * exp(channel_log_sd * g)  [channel_log_sd 0.25]
 *                v_th     = exp(token_log_sd * g_th)         [token_log_sd 0.3]
 *                x        = v_th * sigma_hc * z
 *              no offsets, no outliers, no RoPE. Given the channel sigmas,
 *              E x = 0 and E x^2 = sigma_hc^2 exp(2 token_log_sd^2); averaged over the
 *              channel draw E x^2 = scale^2 exp(2 channel_log_sd^2) exp(2 token_log_sd^2).
 *
 * z, g, g' are independent N(0, 1) draws; the Gaussian and Student-t kinds ignore the
 * shape except for its element count. */
#ifndef LOWP_GEN_H
#define LOWP_GEN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lowp_gen_kind {
    LOWP_GEN_GAUSSIAN = 0,
    LOWP_GEN_STUDENT_T = 1,
    LOWP_GEN_K_LIKE = 2,
    LOWP_GEN_V_LIKE = 3
} lowp_gen_kind;
#define LOWP_GEN_KIND_COUNT 4

#define LOWP_GEN_CHUNK 4096 /* elements per random stream of the flat generators */

typedef struct lowp_gen_params {
    double scale;              /* every kind: overall magnitude (see the models above) */
    double nu;                 /* student-t degrees of freedom, > 0 */
    double channel_log_sd;     /* k/v: log-sd of the per-channel sigma */
    double channel_mean_sd;    /* k: per-channel offset, in units of the channel sigma */
    double token_log_sd;       /* k/v: log-sd of the per-(token, head) scale */
    unsigned outliers_per_head;/* k: massive channels per head, at most D/2 */
    double outlier_min, outlier_max; /* k: massive magnitude range, in units of scale */
    double outlier_rel_sd;     /* k: relative spread of a massive channel over tokens */
    int rope;                  /* k: apply RoPE (0: pre-RoPE keys) */
    double rope_base;          /* k: RoPE base (10000 Llama-2, 500000 Llama-3) */
    int rope_interleaved;      /* k: pairs (2i, 2i+1) instead of (i, i + D/2) */
    double pos_offset;         /* k: position of token 0 */
} lowp_gen_params;

/* Names "gaussian" "student-t" "k-like" "v-like"; the parser returns 0 or -1. */
const char *lowp_gen_kind_name(lowp_gen_kind k);
int lowp_gen_kind_parse(const char *name, lowp_gen_kind *out);

/* The defaults stated above for a kind. */
lowp_gen_params lowp_gen_defaults(lowp_gen_kind k);

/* Fill out[T * H * D] (row-major [T, H, D]) with the kind's model. p NULL means the
 * defaults. Returns 0, or -1 with a one-sentence reason (bad parameter, odd D for k-like,
 * out of memory). */
int lowp_gen(lowp_gen_kind k, const lowp_gen_params *p, uint64_t seed, size_t tokens,
             size_t heads, size_t dim, float *out, char *why, size_t why_len);

/* The k-like massive channels of head h (the indices into D, ascending); chan gets
 * p->outliers_per_head entries. Returns the count, or 0 when there are none or the
 * parameters are invalid. The same draw as lowp_gen uses. */
size_t lowp_gen_outlier_channels(const lowp_gen_params *p, uint64_t seed, size_t heads, size_t dim,
                                 size_t h, size_t *chan);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GEN_H */
