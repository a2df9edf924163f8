/* tests/test_select.c: the selection primitives of lowp/select.h on cases whose answers
 * are worked out by hand here, the top-k against a brute-force sort, and the refusals.
 * The QSA model itself is compared with an independent numpy implementation in
 * tests/interop_select.py. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/format.h"
#include "lowp/select.h"
#include "lowp_test.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_topk_tie_rule_and_masks)
{
    /* 3 and 5 tie at 2.0 (3 first), -0 ties +0 (index 1 before 4), -Inf never selected,
     * +Inf first */
    const float s[] = {1.0f, 0.0f, -INFINITY, 2.0f, -0.0f, 2.0f, INFINITY, -1.0f};
    int32_t idx[10];
    size_t cnt = 99;
    ck_assert_int_eq(lowp_topk(s, N_ELEMS(s), 10, idx, &cnt, NULL, 0), 0);
    const int32_t want[] = {6, 3, 5, 0, 1, 4, 7, -1, -1, -1};
    ck_assert_uint_eq(cnt, 7);
    for (size_t i = 0; i < N_ELEMS(want); i++)
        ck_assert_int_eq(idx[i], want[i]);
    ck_assert_int_eq(lowp_topk(s, N_ELEMS(s), 2, idx, &cnt, NULL, 0), 0);
    ck_assert_uint_eq(cnt, 2);
    ck_assert_int_eq(idx[0], 6);
    ck_assert_int_eq(idx[1], 3);
    /* k = 0 and n = 0 select nothing */
    ck_assert_int_eq(lowp_topk(s, 0, 3, idx, &cnt, NULL, 0), 0);
    ck_assert_uint_eq(cnt, 0);
    ck_assert_int_eq(idx[0], -1);
    ck_assert_int_eq(lowp_topk(s, N_ELEMS(s), 0, NULL, &cnt, NULL, 0), 0);
    ck_assert_uint_eq(cnt, 0);
}
END_TEST

START_TEST(test_topk_refuses_nan)
{
    const float s[] = {1.0f, NAN, 3.0f};
    int32_t idx[3];
    size_t cnt = 5;
    char why[128] = "";
    ck_assert_int_eq(lowp_topk(s, 3, 2, idx, &cnt, why, sizeof why), -1);
    ck_assert_uint_eq(cnt, 0);
    ck_assert_msg(strstr(why, "score 1 is NaN") != NULL, "why: %s", why);
}
END_TEST

/* brute force: the rank of every entry by counting the ones that beat it */
START_TEST(test_topk_equals_brute_force)
{
    uint64_t st = lowp_test_seed("test_select", 0x73656c63u);
    enum { N = 300 };
    float s[N];
    int32_t idx[N], want[N];
    for (int rep = 0; rep < 400; rep++) {
        size_t n = 1 + (size_t)(lowp_test_urand(&st) * N), k = (size_t)(lowp_test_urand(&st) * (double)(n + 3));
        int levels = 1 + (int)(lowp_test_urand(&st) * 8); /* few levels: many ties */
        size_t finite = 0;
        for (size_t i = 0; i < n; i++) {
            double u = lowp_test_urand(&st);
            s[i] = u < 0.1 ? -INFINITY : u < 0.15 ? INFINITY : (float)(int)(lowp_test_urand(&st) * levels) - 2.0f;
            if (s[i] == 0.0f && lowp_test_urand(&st) < 0.5)
                s[i] = -0.0f;
            finite += s[i] != -INFINITY;
        }
        for (size_t i = 0; i < n; i++) {
            size_t r = 0;
            for (size_t j = 0; j < n; j++)
                r += lowp_topk_better(s, (int32_t)j, (int32_t)i);
            want[r] = (int32_t)i; /* ranks are a permutation: the order is total */
        }
        size_t cnt;
        ck_assert_int_eq(lowp_topk(s, n, k, idx, &cnt, NULL, 0), 0);
        size_t m = k < finite ? k : finite;
        ck_assert_uint_eq(cnt, m);
        for (size_t i = 0; i < k; i++)
            ck_assert_msg(idx[i] == (i < m ? want[i] : -1), "rep %d n %zu k %zu: slot %zu is %d, want %d", rep,
                          n, k, i, (int)idx[i], (int)(i < m ? want[i] : -1));
    }
}
END_TEST

START_TEST(test_drift_by_hand)
{
    /* reference scores: block 4 best, then 2, 0, 1, 3, 5 */
    const float rs[] = {3.0f, 2.0f, 4.0f, 1.0f, 5.0f, 0.0f};
    const int32_t ref[] = {4, 2, 0};
    const int32_t got[] = {0, 5, 4}; /* keeps 4 and 0, loses 2, 5 is an intruder of rank 5 */
    lowp_select_drift d;
    ck_assert_int_eq(lowp_select_drift_of(ref, 3, got, 3, rs, 6, &d, NULL, 0), 0);
    ck_assert_uint_eq(d.common, 2);
    ck_assert_uint_eq(d.lost, 1);
    ck_assert_uint_eq(d.intruders, 1);
    ck_assert(d.jaccard == 2.0 / 4.0);
    ck_assert(d.recall == 2.0 / 3.0);
    ck_assert_uint_eq(d.max_intruder_rank, 5);
    ck_assert(d.mean_intruder_rank == 5.0);
    /* order never counts: the same set in another order is no drift */
    const int32_t perm[] = {0, 4, 2};
    ck_assert_int_eq(lowp_select_drift_of(ref, 3, perm, 3, rs, 6, &d, NULL, 0), 0);
    ck_assert(d.jaccard == 1.0 && d.recall == 1.0 && d.lost == 0 && d.intruders == 0);
    /* both empty: identical */
    ck_assert_int_eq(lowp_select_drift_of(ref, 0, got, 0, rs, 6, &d, NULL, 0), 0);
    ck_assert(d.jaccard == 1.0 && d.recall == 1.0);
    ck_assert(lowp_select_contains(got, 3, 5) && !lowp_select_contains(got, 3, 2));
}
END_TEST

START_TEST(test_drift_refusals)
{
    const float rs[] = {1.0f, 2.0f, 3.0f};
    const int32_t ok[] = {0, 1}, out[] = {0, 3}, rep[] = {1, 1};
    lowp_select_drift d;
    char why[128];
    ck_assert_int_eq(lowp_select_drift_of(ok, 2, out, 2, rs, 3, &d, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "outside") != NULL, "%s", why);
    ck_assert_int_eq(lowp_select_drift_of(rep, 2, ok, 2, rs, 3, &d, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "twice") != NULL, "%s", why);
    const float nan_s[] = {1.0f, NAN, 3.0f};
    ck_assert_int_eq(lowp_select_drift_of(ok, 2, ok, 2, nan_s, 3, &d, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "NaN") != NULL, "%s", why);
}
END_TEST

START_TEST(test_qsa_index_list_layout)
{
    /* ratio 4, top-2 of 5 visible blocks at position 22 (blocks 0..4 complete: 0..19;
     * the open tail 20, 21, 22) */
    lowp_qsa_config c = lowp_qsa_config_default();
    c.topk = 2;
    const float sc[] = {0.5f, 3.0f, 1.0f, 3.0f, 2.0f}; /* 1 and 3 tie: both in */
    size_t W = lowp_qsa_index_width(&c);
    ck_assert_uint_eq(W, 2 * 4 + 3);
    int32_t index[12], blocks[2];
    size_t nb;
    ck_assert_int_eq(lowp_qsa_select(&c, sc, 5, 22, index, blocks, &nb, NULL, 0), 0);
    const int32_t want[] = {4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 11};
    for (size_t i = 0; i < N_ELEMS(want); i++)
        ck_assert_int_eq(index[i], want[i]);
    ck_assert_uint_eq(nb, 2);
    ck_assert_int_eq(blocks[0], 1);
    ck_assert_int_eq(blocks[1], 3);
    /* the production width: 2051 slots and the count column */
    c = lowp_qsa_config_default();
    ck_assert_uint_eq(lowp_qsa_index_width(&c), 2051);
    /* at position 3 one block is complete and there is no tail */
    c.topk = 2;
    ck_assert_int_eq(lowp_qsa_select(&c, sc, 1, 3, index, blocks, &nb, NULL, 0), 0);
    const int32_t want1[] = {0, 1, 2, 3, -1, -1, -1, -1, -1, -1, -1, 4};
    for (size_t i = 0; i < N_ELEMS(want1); i++)
        ck_assert_int_eq(index[i], want1[i]);
}
END_TEST

START_TEST(test_qsa_refusals)
{
    char why[256];
    lowp_qsa_config c = lowp_qsa_config_default();
    float sc[4] = {1, 2, 3, NAN};
    int32_t index[2060];
    size_t nb;
    /* NaN score */
    ck_assert_int_eq(lowp_qsa_select(&c, sc, 4, 17, index, NULL, &nb, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "NaN") != NULL, "%s", why);
    /* visible blocks that do not match the position */
    ck_assert_int_eq(lowp_qsa_select(&c, sc, 3, 17, index, NULL, &nb, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "complete blocks are 4") != NULL, "%s", why);
    /* a query past the sequence */
    float qo[4 * 128] = {0};
    double kb[128] = {0};
    size_t vis;
    ck_assert_int_eq(lowp_qsa_scores(&c, qo, kb, 4, 4, sc, &vis, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "outside the sequence") != NULL, "%s", why);
    /* configurations */
    c.rotary_dim = 130;
    ck_assert_int_eq(lowp_qsa_scores(&c, qo, kb, 4, 3, sc, &vis, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "rotary dim 130") != NULL, "%s", why);
    c = lowp_qsa_config_default();
    c.keys = LOWP_QSA_KEYS_MXFP4;
    c.head_dim = 48;
    c.rotary_dim = 16;
    ck_assert_int_eq(lowp_qsa_scores(&c, qo, kb, 4, 3, sc, &vis, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "multiple of 32") != NULL, "%s", why);
    c = lowp_qsa_config_default();
    c.ratio = 0;
    ck_assert_int_eq(lowp_qsa_scores(&c, qo, kb, 4, 3, sc, &vis, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "compression ratio 0") != NULL, "%s", why);
}
END_TEST


START_TEST(test_dsa_fp4_midpoints_by_hand)
{
    /* amax 6 -> sf = 2^ceil_ue8m0(6 / 6) = 1; exact midpoints 0.75, 2.5, 5, -0.25: DeepGEMM's
     * encoder goes toward zero (0.5, 2, 4, +0), nearest-even gives 1, 2, 4, -0 */
    lowp_dsa_config c = lowp_dsa_config_default();
    c.head_dim = 32;
    c.keys = LOWP_DSA_KEYS_FP4;
    float k[32] = {6.0f, 0.75f, 2.5f, 5.0f, -0.25f, 1.75f, -3.5f};
    float kq[32], ks;
    const float dg[7] = {6.0f, 0.5f, 2.0f, 4.0f, 0.0f, 1.5f, -3.0f};
    const float rne[7] = {6.0f, 1.0f, 2.0f, 4.0f, -0.0f, 2.0f, -4.0f};
    for (int r = 0; r < 2; r++) {
        c.fp4_round = r ? LOWP_DSA_FP4_DEEPGEMM : LOWP_DSA_FP4_RNE;
        ck_assert_int_eq(lowp_dsa_keys_quantize(&c, k, 1, kq, &ks, NULL, NULL, 0), 0);
        ck_assert(ks == 1.0f);
        for (int i = 0; i < 7; i++) {
            float want = r ? dg[i] : rne[i];
            ck_assert_msg(kq[i] == want && signbit(kq[i]) == signbit(want), "round %d: %g -> %g, want %g", r,
                          (double)k[i], (double)kq[i], (double)want);
        }
    }
}
END_TEST

START_TEST(test_dsa_refusals)
{
    char why[256];
    lowp_dsa_config c = lowp_dsa_config_default();
    c.keys = LOWP_DSA_KEYS_FP4;
    c.head_dim = 48;
    float k[48] = {0}, kq[48], ks, sc[2];
    size_t vis;
    ck_assert_int_eq(lowp_dsa_keys_quantize(&c, k, 1, kq, &ks, NULL, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "multiple of 32") != NULL, "%s", why);
    c = lowp_dsa_config_default();
    c.heads = 1;
    c.head_dim = 48;
    float q[48] = {0}, w[1] = {1};
    ck_assert_int_eq(lowp_dsa_scores(&c, q, w, kq, &ks, 1, 1, sc, &vis, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "outside the sequence") != NULL, "%s", why);
    c.q_floor = 0;
    ck_assert_int_eq(lowp_dsa_scores(&c, q, w, kq, &ks, 1, 0, sc, &vis, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "floors") != NULL, "%s", why);
}
END_TEST


START_TEST(test_blocksel_forced_and_refusals)
{
    /* NSA with the paper's forced blocks: block 0 (sink) and the 2 most recent (current
     * included) are +Inf, the others are probabilities in [0, 1] summed over 2 heads */
    lowp_blocksel_config c = {LOWP_BLOCKSEL_NSA, 2, 1, 4, 2, 8, 1, 2};
    float k[40 * 4], q[2 * 4] = {1, 0, 0, 0, 0, 1, 0, 0}, sc[20];
    for (int i = 0; i < 40 * 4; i++)
        k[i] = (float)((i * 7) % 5) - 2.0f;
    size_t nb;
    ck_assert_int_eq(lowp_blocksel_scores(&c, q, k, 40, 37, sc, &nb, NULL, 0), 0);
    ck_assert_uint_eq(nb, 19); /* blocks 0..18, the current one is 18 */
    ck_assert(isinf(sc[0]) && isinf(sc[18]) && isinf(sc[17]));
    for (int i = 1; i < 17; i++)
        ck_assert_msg(sc[i] >= 0.0f && sc[i] <= 2.0f, "block %d: %g", i, (double)sc[i]);
    /* MoBA: one unit per query head, only the current block forced */
    c.method = LOWP_BLOCKSEL_MOBA;
    ck_assert_uint_eq(lowp_blocksel_units(&c), 2);
    float sm[2 * 19];
    ck_assert_int_eq(lowp_blocksel_scores(&c, q, k, 40, 37, sm, &nb, NULL, 0), 0);
    ck_assert(isinf(sm[18]) && !isinf(sm[17]) && !isinf(sm[0]) && isinf(sm[19 + 18]));
    char why[256];
    ck_assert_int_eq(lowp_blocksel_scores(&c, q, k, 40, 40, sm, &nb, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "outside the sequence") != NULL, "%s", why);
    c.q_heads = 3;
    c.kv_heads = 2;
    ck_assert_int_eq(lowp_blocksel_scores(&c, q, k, 40, 3, sm, &nb, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "3 query heads over 2 KV heads") != NULL, "%s", why);
}
END_TEST


/* a value of f nearest x (RN) */
static float round_to(lowp_format f, float x)
{
    lowp_codec c;
    lowp_codec_init(&c, f, LOWP_PROFILE_OCP, LOWP_RN, LOWP_SAT_ON, NULL, 0);
    return lowp_decode_f32(f, lowp_encode_f32(&c, x));
}

START_TEST(test_sparse_attn_by_hand)
{
    /* one token: p = 1, l = 1, the output is the token's value through the path's dtypes */
    float q[2] = {1.0f, 2.0f}, k[2] = {0.5f, -1.0f}, v[2] = {0.1015625f, -3.0f}, gate[2] = {0.0f, 1.0f};
    double out[2];
    lowp_sparse_attn_args a = {LOWP_SPARSE_EXACT, 2, 1.0, 1.0};
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k, v, 1, NULL, out, NULL, 0), 0);
    ck_assert(out[0] == (double)v[0] && out[1] == -3.0);
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k, v, 1, gate, out, NULL, 0), 0);
    ck_assert(out[0] == (double)v[0] * 0.5 && fabs(out[1] - (-3.0 / (1.0 + exp(-1.0)))) < 1e-15);
    /* FP8 path, v_scale 2: o = fp16(v) * fl32(2 / 1), then BF16: 0.1015625 = 13 x 2^-7
     * is exact in fp16 and BF16; gate 0 halves it exactly */
    a.path = LOWP_SPARSE_FP8;
    a.v_scale = 2.0;
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k, v, 1, gate, out, NULL, 0), 0);
    ck_assert(out[0] == 0.1015625);
    ck_assert(out[1] == (double)(-6.0f * (float)(1.0 / (1.0 + exp(-1.0)))));
    /* two tokens with equal scores share the mass equally: (v0 + v1) / 2 */
    float k2[4] = {1.0f, 1.0f, 1.0f, 1.0f}, v2[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    a.path = LOWP_SPARSE_BF16;
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k2, v2, 2, NULL, out, NULL, 0), 0);
    ck_assert(out[0] == 2.0 && out[1] == 3.0);
    /* nothing selected: 0 */
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k2, v2, 0, NULL, out, NULL, 0), 0);
    ck_assert(out[0] == 0.0 && out[1] == 0.0);
    char why[128];
    a.path = LOWP_SPARSE_FP8;
    a.k_scale = 0.0;
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k2, v2, 2, NULL, out, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "scales") != NULL, "%s", why);
    a.k_scale = 1.0;
    a.dim = 0;
    ck_assert_int_eq(lowp_sparse_attn(&a, q, k2, v2, 2, NULL, out, why, sizeof why), -1);
}
END_TEST

/* The production paths against the exact one under the tolerance their dtypes give.
 * Weights: s_j carries at most 6 binary32 roundings relative to the exact score times log2 e
 * (the dot, the three scale roundings, the product: 6 x 2^-24 |s|), the subtraction s_j - m
 * 2^-24 |s_j - m| (the shift m itself cancels in the normalization), exp2 and l one
 * rounding each, P_j its dtype's u_P (fp16 2^-11, BF16 2^-8): every weight is the exact one
 * times (1 + rho_j), |rho_j| <= rho = ln 2 max_j Delta_j (1.01) + u_P + 2^-22. A weighted
 * mean with perturbed weights moves by at most 2 rho / (1 - rho) max |v|; acc, inv and o add
 * 2^-22 max |v| (relative to l), the BF16 output 2^-8 |o| (2^-7 |o*| covers it), the gate's
 * product one more 2^-24. */
START_TEST(test_sparse_attn_production_within_tolerance)
{
    uint64_t st = lowp_test_seed("test_select", 0x73706172u);
    enum { D = 64, NMAX = 200 };
    static float q[D], k[NMAX * D], v[NMAX * D], gate[D];
    double ex[D], pr[D];
    size_t checked = 0;
    for (int rep = 0; rep < 300; rep++) {
        int fp8 = rep % 2;
        size_t n = 1 + (size_t)(lowp_test_urand(&st) * NMAX);
        double spread = 0.25 + 3.0 * lowp_test_urand(&st);
        lowp_format ef = fp8 ? LOWP_E4M3 : LOWP_BF16;
        for (size_t i = 0; i < D; i++) {
            q[i] = round_to(LOWP_BF16, (float)(spread * lowp_test_gauss(&st)));
            gate[i] = round_to(LOWP_BF16, (float)(2.0 * lowp_test_gauss(&st)));
        }
        for (size_t i = 0; i < n * D; i++) {
            k[i] = round_to(ef, (float)(spread * lowp_test_gauss(&st)));
            v[i] = round_to(ef, (float)lowp_test_gauss(&st));
        }
        double ks = fp8 ? ldexp(1.0, -3 + rep % 5) : 1.0, vs = fp8 ? 0.75 : 1.0;
        lowp_sparse_attn_args ae = {LOWP_SPARSE_EXACT, D, ks, vs}, ap = {fp8 ? LOWP_SPARSE_FP8 : LOWP_SPARSE_BF16, D, ks, vs};
        const float *g = rep % 3 ? gate : NULL;
        ck_assert_int_eq(lowp_sparse_attn(&ae, q, k, v, n, g, ex, NULL, 0), 0);
        ck_assert_int_eq(lowp_sparse_attn(&ap, q, k, v, n, g, pr, NULL, 0), 0);
        double smax = 0, maxv = 0, sm = ks / sqrt((double)D) * 1.4426950408889634;
        double sv[NMAX];
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t i = 0; i < D; i++)
                s += (double)q[i] * k[j * D + i];
            sv[j] = s * sm;
            smax = fabs(sv[j]) > smax ? fabs(sv[j]) : smax;
        }
        double mx = -INFINITY, dmax = 0;
        for (size_t j = 0; j < n; j++)
            mx = sv[j] > mx ? sv[j] : mx;
        for (size_t j = 0; j < n; j++) {
            double dj = 6 * 0x1p-24 * fabs(sv[j]) * 1.01 + 0x1p-24 * (fabs(sv[j] - mx) + 12 * 0x1p-24 * smax);
            dmax = dj > dmax ? dj : dmax;
        }
        for (size_t i = 0; i < n * D; i++)
            maxv = fabs(v[i]) > maxv ? fabs(v[i]) : maxv;
        double rho = log(2.0) * dmax * 1.01 + (fp8 ? 0x1p-11 : 0x1p-8) + 0x1p-22;
        for (size_t e = 0; e < D; e++) {
            double sig = g ? 1.0 / (1.0 + exp(-(double)g[e])) : 1.0;
            double tol = sig * ((2 * rho / (1 - rho) + 0x1p-22) * maxv * vs) + 0x1p-7 * fabs(ex[e]);
            ck_assert_msg(fabs(pr[e] - ex[e]) <= tol, "rep %d n %zu dim %zu: production %.9g exact %.9g tol %.3g",
                          rep, n, e, pr[e], ex[e], tol);
            checked++;
        }
    }
    ck_assert_uint_eq(checked, 300 * D);
}
END_TEST

static Suite *select_suite(void)
{
    Suite *s = suite_create("select");
    TCase *t = tcase_create("select");
    tcase_add_test(t, test_topk_tie_rule_and_masks);
    tcase_add_test(t, test_topk_refuses_nan);
    tcase_add_test(t, test_topk_equals_brute_force);
    tcase_add_test(t, test_drift_by_hand);
    tcase_add_test(t, test_drift_refusals);
    tcase_add_test(t, test_qsa_index_list_layout);
    tcase_add_test(t, test_qsa_refusals);
    tcase_add_test(t, test_dsa_fp4_midpoints_by_hand);
    tcase_add_test(t, test_dsa_refusals);
    tcase_add_test(t, test_blocksel_forced_and_refusals);
    tcase_add_test(t, test_sparse_attn_by_hand);
    tcase_add_test(t, test_sparse_attn_production_within_tolerance);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return lowp_test_main(select_suite(), LOWP_TEST_FORK); }
