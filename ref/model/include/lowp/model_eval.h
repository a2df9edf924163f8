/* lowp/model_eval.h: end-to-end quality of a KV cache format against the binary32-cache
 * run on the same tokens, with block-bootstrap confidence intervals.
 *
 * Per predicted token (the next-token distributions of the two runs, p_ref from the
 * binary32 cache and p from the format; both log-softmax in binary64 over binary32
 * logits, max subtracted):
 *   nll_ref = -log p_ref(target),  nll = -log p(target)
 *   kl      = KL(p_ref || p) = sum_j p_ref_j (log p_ref_j - log p_j)  (>= 0 up to rounding;
 *             exactly 0 for bit-identical logits)
 *   top1    = 1 if argmax p == argmax p_ref (first index of the max), else 0
 *
 * Confidence intervals: a statistic of the per-token columns' means (perplexity
 * exp(mean nll), its difference from the reference's, top-1 agreement, mean KL) over n
 * tokens in a fixed order, resampled by the non-overlapping block bootstrap: the tokens
 * are cut into ceil(n / block) consecutive blocks (the last may be shorter); a replicate
 * draws that many blocks uniformly with replacement and takes the column sums over the
 * drawn tokens divided by their count. Blocks, not tokens: neighbouring tokens share
 * their context and their errors are correlated, so resampling single tokens would
 * understate the variance; a block of 64 tokens keeps that short-range dependence inside a
 * unit. The interval is the percentile interval: the nearest-rank 2.5% and 97.5% points
 * of reps replicates (the ceil(0.025 reps)-th and ceil(0.975 reps)-th smallest). The draws
 * are lowp_splitmix64 from the seed: a seed reproduces the interval on any machine. */
#ifndef LOWP_MODEL_EVAL_H
#define LOWP_MODEL_EVAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_eval_token {
    double nll_ref, nll, kl;
    int top1;
} lowp_eval_token;

/* The statistics of one position: z_ref, z the two runs' logits (n_vocab each), target
 * the next token (0 <= target < n_vocab). */
lowp_eval_token lowp_eval_token_stats(const float *z_ref, const float *z, size_t n_vocab, int32_t target);

/* First index of the maximum of z[0 .. n) (NaN never wins). */
size_t lowp_eval_argmax(const float *z, size_t n);

/* Leading tokens on which two generations agree. */
size_t lowp_eval_agree_len(const int32_t *a, const int32_t *b, size_t n);

/* The columns a statistic sees: the means over (a resample of) the tokens. */
enum { LOWP_EVAL_NLL_REF = 0, LOWP_EVAL_NLL = 1, LOWP_EVAL_KL = 2, LOWP_EVAL_TOP1 = 3, LOWP_EVAL_COLS = 4 };
typedef enum lowp_eval_stat {
    LOWP_EVAL_PPL = 0,      /* exp(mean nll) */
    LOWP_EVAL_PPL_REF = 1,  /* exp(mean nll_ref) */
    LOWP_EVAL_DPPL = 2,     /* exp(mean nll) - exp(mean nll_ref) (paired) */
    LOWP_EVAL_MEAN_KL = 3,
    LOWP_EVAL_TOP1_AGREE = 4
} lowp_eval_stat;
#define LOWP_EVAL_STAT_COUNT 5
const char *lowp_eval_stat_name(lowp_eval_stat s); /* "ppl" "ppl_ref" "dppl" "kl" "top1" */
double lowp_eval_stat_of(lowp_eval_stat s, const double means[LOWP_EVAL_COLS]);

typedef struct lowp_eval_ci {
    double est, lo, hi; /* the statistic on all tokens, and its 95% percentile interval */
} lowp_eval_ci;

/* The estimate and interval of every statistic (out[LOWP_EVAL_STAT_COUNT]) over tokens
 * t[0 .. n) by the block bootstrap above (block >= 1, reps >= 1; reps 0 gives the
 * estimates with lo = hi = est). -1 with a reason for n == 0 or out of memory. */
int lowp_eval_bootstrap(const lowp_eval_token *t, size_t n, size_t block, size_t reps, uint64_t seed,
                        lowp_eval_ci *out, char *why, size_t why_len);

/* The mean of x[0 .. n) and its percentile interval, resampling single values (for
 * per-prompt quantities such as the greedy agreement length: prompts are independent). */
int lowp_eval_bootstrap_mean(const double *x, size_t n, size_t reps, uint64_t seed, lowp_eval_ci *out, char *why,
                             size_t why_len);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_MODEL_EVAL_H */
