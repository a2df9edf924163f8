/* tests/test_attn_gpu_extend.c: the GPU extend / prefill kernel's definition and its CPU
 * emulator (lowp/attn_gpu_extend.h), on any machine.
 *
 * Expected values come from outside the emulator:
 *   - binary64 attention (lowp/attn.h) on the binary32 queries and the workspace's exact
 *     E4M3 values, within the header's derived bound, on ragged random batches (GQA 1..16
 *     with 5, 6, 12; qk_dim != vo_dim; prefixes and chunks crossing key blocks; NaN-poisoned
 *     workspace rows past each sequence's kv_len);
 *   - a sequence of one position: the output is V (p = 1, l = 1, an MMA of one exact product);
 *   - causal visibility: a key a query must not see changes none of its bits (and one it
 *     sees does change its output, so the check can fail);
 *   - the thread count never changes a bit; bad shapes are refused with one line.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/attn_gpu_extend.h"
#include "lowp/bits.h"
#include "lowp/format.h"
#include "lowp_test.h"

static uint64_t seed0;

/* A random ragged batch and its data, owned by the struct. */
typedef struct batch {
    lowp_gpu_extend_args a;
    int32_t qo[9], kv[9], pre[8];
    float *q32;
    uint16_t *q;
    uint8_t *k, *v;
} batch;

/* A finite E4M3 code of magnitude 2^-3 .. 2^3 (exponent field 4..10), random sign. */
static uint8_t draw_e4m3(uint64_t *s)
{
    unsigned e = (unsigned)lowp_test_irange(s, 4, 10), m = (unsigned)lowp_test_irange(s, 0, 7);
    return (uint8_t)((lowp_test_urand(s) < 0.5 ? 0x80u : 0u) | (e << 3) | m);
}

static void batch_make(batch *B, uint64_t *s, size_t nseq, size_t HK, size_t G, size_t Dq,
                       size_t Dv, const size_t *P, const size_t *ql, size_t slack)
{
    memset(B, 0, sizeof *B);
    B->qo[0] = B->kv[0] = 0;
    for (size_t b = 0; b < nseq; b++) {
        B->pre[b] = (int32_t)P[b];
        B->qo[b + 1] = B->qo[b] + (int32_t)ql[b];
        B->kv[b + 1] = B->kv[b] + (int32_t)(P[b] + ql[b] + slack);
    }
    size_t NQ = HK * G, nq = (size_t)B->qo[nseq], rows = (size_t)B->kv[nseq];
    B->q32 = lowp_test_xmalloc(nq * NQ * Dq * sizeof(float));
    B->q = lowp_test_xmalloc(nq * NQ * Dq * sizeof(uint16_t));
    B->k = lowp_test_xmalloc(rows * HK * Dq);
    B->v = lowp_test_xmalloc(rows * HK * Dv);
    for (size_t x = 0; x < nq * NQ * Dq; x++) {
        B->q32[x] = (float)(2.0 * lowp_test_gauss(s));
        B->q[x] = lowp_bf16_from_f32(B->q32[x]);
    }
    memset(B->k, 0x7F, rows * HK * Dq); /* NaN: every row past a kv_len stays poisoned */
    memset(B->v, 0x7F, rows * HK * Dv);
    for (size_t b = 0; b < nseq; b++)
        for (size_t r = (size_t)B->kv[b]; r < (size_t)B->kv[b] + P[b] + ql[b]; r++) {
            for (size_t x = 0; x < HK * Dq; x++)
                B->k[r * HK * Dq + x] = draw_e4m3(s);
            for (size_t x = 0; x < HK * Dv; x++)
                B->v[r * HK * Dv + x] = draw_e4m3(s);
        }
    B->a = (lowp_gpu_extend_args){.batch = nseq, .qo_indptr = B->qo, .kv_indptr = B->kv,
                                  .prefix_len = B->pre, .kv_rows = rows, .num_q_heads = NQ,
                                  .num_kv_heads = HK, .qk_dim = Dq, .vo_dim = Dv,
                                  .q = B->q, .k = B->k, .v = B->v};
}

static void batch_free(batch *B)
{
    free(B->q32);
    free(B->q);
    free(B->k);
    free(B->v);
}

static size_t out_count(const batch *B)
{
    return (size_t)B->qo[B->a.batch] * B->a.num_q_heads * B->a.vo_dim;
}

START_TEST(emulator_within_bound)
{
    static const size_t groups[] = {1, 2, 4, 5, 6, 8, 12, 16};
    static const size_t dims[][2] = {{64, 64}, {128, 128}, {192, 128}, {128, 64}, {256, 256},
                                     {64, 192}, {256, 128}, {128, 256}};
    uint64_t s = lowp_test_stream(seed0, 1, 0, 0);
    double worst = 0.0;
    size_t outputs = 0;
    for (int c = 0; c < 16; c++) {
        size_t nseq = (size_t)lowp_test_irange(&s, 1, 3), P[3], ql[3];
        for (size_t b = 0; b < nseq; b++) {
            static const size_t pres[] = {0, 1, 63, 64, 65, 130};
            P[b] = pres[lowp_test_irange(&s, 0, 5)];
            ql[b] = (size_t)lowp_test_irange(&s, 1, 40);
        }
        size_t G = groups[c % 8], HK = (size_t)lowp_test_irange(&s, 1, 2);
        const size_t *dm = dims[(c / 2 + c) % 8];
        batch B;
        batch_make(&B, &s, nseq, HK, G, dm[0], dm[1], P, ql, (size_t)lowp_test_irange(&s, 0, 3));
        size_t n = out_count(&B);
        uint16_t *out = lowp_test_xmalloc(n * sizeof *out);
        double *ref = lowp_test_xmalloc(n * sizeof *ref), *bd = lowp_test_xmalloc(n * sizeof *bd);
        char why[256];
        ck_assert_msg(lowp_gpu_extend_emulate(&B.a, out, why, sizeof why) == 0, "%s", why);
        ck_assert_msg(lowp_gpu_extend_reference(&B.a, B.q32, ref, bd, why, sizeof why) == 0,
                      "%s", why);
        for (size_t x = 0; x < n; x++) {
            ck_assert_msg(isfinite(bd[x]), "case %d output %zu: no bound", c, x);
            double err = fabs((double)lowp_f32_from_bf16(out[x]) - ref[x]);
            ck_assert_msg(err <= bd[x], "case %d (G %zu, dims %zu/%zu) output %zu: emulator %a "
                          "exact %a bound %.3g",
                          c, G, dm[0], dm[1], x, (double)lowp_f32_from_bf16(out[x]), ref[x],
                          bd[x]);
            worst = err / bd[x] > worst ? err / bd[x] : worst;
        }
        outputs += n;
        free(out);
        free(ref);
        free(bd);
        batch_free(&B);
    }
    printf("extend emulator vs binary64: %zu outputs, worst err/bound %.3g\n", outputs, worst);
}
END_TEST

START_TEST(one_position_is_v)
{
    uint64_t s = lowp_test_stream(seed0, 2, 0, 0);
    size_t P[2] = {0, 0}, ql[2] = {1, 1};
    batch B;
    batch_make(&B, &s, 2, 2, 6, 128, 64, P, ql, 2);
    uint16_t out[2 * 12 * 64];
    char why[256];
    ck_assert_msg(lowp_gpu_extend_emulate(&B.a, out, why, sizeof why) == 0, "%s", why);
    for (size_t b = 0; b < 2; b++)
        for (size_t hq = 0; hq < 12; hq++)
            for (size_t d = 0; d < 64; d++) {
                uint8_t c = B.v[((size_t)B.kv[b] * 2 + hq / 6) * 64 + d];
                ck_assert_uint_eq(out[(b * 12 + hq) * 64 + d],
                                  lowp_gpu_decode_element_bf16(LOWP_FP8_E4M3, c, 0));
            }
    batch_free(&B);
}
END_TEST

START_TEST(causal_visibility)
{
    uint64_t s = lowp_test_stream(seed0, 3, 0, 0);
    size_t P[1] = {70}, ql[1] = {30}, G = 5, Dq = 64, Dv = 128, NQ = G;
    batch B;
    batch_make(&B, &s, 1, 1, G, Dq, Dv, P, ql, 0);
    size_t n = out_count(&B);
    uint16_t *o0 = lowp_test_xmalloc(n * 2), *o1 = lowp_test_xmalloc(n * 2);
    char why[256];
    ck_assert_msg(lowp_gpu_extend_emulate(&B.a, o0, why, sizeof why) == 0, "%s", why);
    /* position 85 is seen by queries i >= 15 only; its key becomes a large one */
    for (size_t d = 0; d < Dq; d++)
        B.k[85 * Dq + d] = 0x7E; /* 448 */
    ck_assert(lowp_gpu_extend_emulate(&B.a, o1, why, sizeof why) == 0);
    size_t changed = 0;
    for (size_t i = 0; i < 30; i++)
        for (size_t x = 0; x < NQ * Dv; x++) {
            size_t at = i * NQ * Dv + x;
            if (70 + i < 85)
                ck_assert_msg(o0[at] == o1[at], "query %zu output %zu changed by a key it "
                              "must not see", i, x);
            else
                changed += o0[at] != o1[at];
        }
    ck_assert_msg(changed > 0, "a visible key changed nothing: the check cannot fail");
    /* a NaN key at an invisible position is masked too (the score is replaced by -Inf) */
    for (size_t d = 0; d < Dq; d++)
        B.k[85 * Dq + d] = 0x7F;
    ck_assert(lowp_gpu_extend_emulate(&B.a, o1, why, sizeof why) == 0);
    for (size_t x = 0; x < 15 * NQ * Dv; x++)
        ck_assert_uint_eq(o0[x], o1[x]);
    free(o0);
    free(o1);
    batch_free(&B);
}
END_TEST

START_TEST(threads_do_not_change_bits)
{
    uint64_t s = lowp_test_stream(seed0, 4, 0, 0);
    size_t P[3] = {100, 0, 17}, ql[3] = {9, 70, 33};
    batch B;
    batch_make(&B, &s, 3, 2, 12, 128, 128, P, ql, 5);
    size_t n = out_count(&B);
    uint16_t *o1 = lowp_test_xmalloc(n * 2), *o3 = lowp_test_xmalloc(n * 2);
    char why[256];
    B.a.threads = 1;
    ck_assert_msg(lowp_gpu_extend_emulate(&B.a, o1, why, sizeof why) == 0, "%s", why);
    B.a.threads = 3;
    ck_assert(lowp_gpu_extend_emulate(&B.a, o3, why, sizeof why) == 0);
    ck_assert(memcmp(o1, o3, n * 2) == 0);
    free(o1);
    free(o3);
    batch_free(&B);
}
END_TEST

static void refused(const lowp_gpu_extend_args *a, const char *needle)
{
    char why[256] = "";
    uint16_t out[8];
    ck_assert(lowp_gpu_extend_check(a, why, sizeof why) == -1);
    ck_assert_msg(strstr(why, needle) != NULL && strchr(why, '\n') == NULL, "'%s' lacks '%s'",
                  why, needle);
    ck_assert(lowp_gpu_extend_emulate(a, out, NULL, 0) == -1);
}

START_TEST(refusals)
{
    uint64_t s = lowp_test_stream(seed0, 5, 0, 0);
    size_t P[2] = {10, 4}, ql[2] = {3, 2};
    batch B;
    batch_make(&B, &s, 2, 2, 2, 64, 64, P, ql, 1);
    char why[256];
    ck_assert_msg(lowp_gpu_extend_check(&B.a, why, sizeof why) == 0, "%s", why);
    lowp_gpu_extend_args a = B.a;
    a.qk_dim = 96;
    refused(&a, "qk_dim 96");
    a = B.a;
    a.vo_dim = 512;
    refused(&a, "vo_dim 512");
    a = B.a;
    a.num_q_heads = 34; /* 17 per KV head */
    refused(&a, "group ratio 17");
    a.num_q_heads = 3;
    refused(&a, "not a positive multiple");
    a = B.a;
    a.kv_rows = (size_t)B.kv[2] - 1;
    refused(&a, "workspace too small");
    a = B.a;
    int32_t pre[2] = {12, 4}; /* 12 + 3 > the region of 14 rows */
    a.prefix_len = pre;
    refused(&a, "do not fit");
    a = B.a;
    int32_t qo[3] = {0, 3, 3};
    a.qo_indptr = qo;
    refused(&a, "sequence 1 has 0 queries");
    a = B.a;
    int32_t kv[3] = {0, 14, 10};
    a.kv_indptr = kv;
    refused(&a, "kv_indptr decreases");
    a = B.a;
    a.k = NULL;
    refused(&a, "must not be NULL");
    a = B.a;
    a.sm_scale = INFINITY;
    refused(&a, "sm_scale");
    batch_free(&B);
}
END_TEST

int main(int argc, char **argv)
{
    (void)lowp_test_tier("test_attn_gpu_extend", argc, argv);
    seed0 = lowp_test_seed("test_attn_gpu_extend", 0x5eedull);
    printf("test_attn_gpu_extend: seed %llu\n", (unsigned long long)seed0);
    Suite *s = suite_create("attn_gpu_extend");
    lowp_test_tcase(s, "extend", 120,
                    LOWP_TESTS(emulator_within_bound, one_position_is_v, causal_visibility,
                               threads_do_not_change_bits, refusals));
    return lowp_test_main(s, LOWP_TEST_NOFORK);
}
