/* tests/test_select_gpu.c: the CPU side of the sparse-selection GPU kernels
 * (lowp/select_gpu.h), runnable without a GPU:
 *  - the index-key cache bytes (definition 1) decode exactly to lowp_qsa_compress's keys
 *    for every key format, E4M3 keys past 464 (NaN: torch's cast does not saturate)
 *    included, and a saturating E4M3 encoder would fail it;
 *  - the RoPE table the kernel takes is lowp_qsa_rope_table's;
 *  - the sparse decode's emulator (the decode emulator over the page-size-1 view with the
 *    selected rows as the page table, definition 2) equals, bit for bit, the decode
 *    emulator over an independent cache holding only the selected tokens, written in
 *    order (each row is quantized alone, so its bytes are the same), for BF16, FP8 and
 *    NVFP4 caches with shuffled pages of 1..64 tokens;
 *  - the refusals: HND and interleaved caches have no view, tokens outside the sequence. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/attn_gpu_emul.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/select_gpu.h"
#include "lowp_test.h"

static uint64_t rng_state;
static double gauss(void)
{
    double u = ((double)(lowp_splitmix64(&rng_state) >> 11) + 0.5) * 0x1p-53;
    double v = (double)(lowp_splitmix64(&rng_state) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}
static float bfv(double x) { return lowp_f32_from_bf16(lowp_bf16_from_f32((float)x)); }

/* decoded row j of the key cache of c into out[head_dim] */
static void decode_row(const lowp_qsa_config *c, const uint8_t *codes, const uint8_t *scales, double *out)
{
    size_t d = c->head_dim;
    if (c->keys == LOWP_QSA_KEYS_BF16)
        for (size_t i = 0; i < d; i++)
            out[i] = lowp_f32_from_bf16((uint16_t)(codes[2 * i] | codes[2 * i + 1] << 8));
    else if (c->keys == LOWP_QSA_KEYS_E4M3)
        for (size_t i = 0; i < d; i++)
            out[i] = lowp_decode_f32(LOWP_E4M3, codes[i]);
    else
        lowp_block_dequantize_f64(lowp_qsa_keycache_format(c->keys), c->gs.dec, codes, scales, d, out);
}

START_TEST(test_keycache_bytes_decode_to_the_model)
{
    rng_state = lowp_test_seed("test_select_gpu", 19);
    const lowp_qsa_keys fm[] = {LOWP_QSA_KEYS_BF16, LOWP_QSA_KEYS_E4M3, LOWP_QSA_KEYS_NVFP4, LOWP_QSA_KEYS_MXFP4,
                                LOWP_QSA_KEYS_MXFP8};
    size_t nan_e4m3 = 0;
    for (size_t f = 0; f < 5; f++)
        for (int rep = 0; rep < 6; rep++) {
            lowp_qsa_config c = lowp_qsa_config_default();
            c.keys = fm[f];
            if (fm[f] == LOWP_QSA_KEYS_MXFP4 || fm[f] == LOWP_QSA_KEYS_MXFP8)
                c.recipe = lowp_recipe_default(lowp_qsa_keycache_format(fm[f]));
            if (fm[f] == LOWP_QSA_KEYS_NVFP4)
                c.gs = lowp_global_scale_from_dec(LOWP_NVFP4, c.recipe, rep % 2 ? 0.75f : 1.0f);
            size_t d = c.head_dim, len = 37 + 11 * (size_t)rep, nb = len / c.ratio;
            float *k = lowp_test_xmalloc(len * d * sizeof *k), wk[128];
            for (size_t i = 0; i < len * d; i++)
                k[i] = bfv(gauss() * (rep == 5 ? 0x1p10 : 1.0));
            for (size_t i = 0; i < d; i++) /* rep 4: weights that push keys past 464 */
                wk[i] = bfv(gauss() * (rep == 4 ? 80.0 : 0.3));
            size_t rb = lowp_qsa_keycache_row_bytes(&c), rs = lowp_qsa_keycache_row_scales(&c);
            uint8_t *codes = lowp_test_xmalloc(nb * rb + 1), *scales = lowp_test_xmalloc(nb * rs + 1);
            double *kb = lowp_test_xmalloc(nb * d * sizeof *kb), row[128];
            char why[256];
            ck_assert_msg(lowp_qsa_keycache_bytes(&c, k, len, wk, codes, rs ? scales : NULL, why, sizeof why) == 0,
                          "%s", why);
            ck_assert_msg(lowp_qsa_compress(&c, k, len, wk, kb, NULL, why, sizeof why) == 0, "%s", why);
            for (size_t b = 0; b < nb; b++) {
                decode_row(&c, codes + b * rb, scales + b * rs, row);
                for (size_t i = 0; i < d; i++) {
                    double want = kb[b * d + i];
                    nan_e4m3 += fm[f] == LOWP_QSA_KEYS_E4M3 && isnan(want);
                    ck_assert_msg((isnan(want) && isnan(row[i])) || want == row[i],
                                  "keys %d rep %d block %zu dim %zu: cache %a, model %a", (int)fm[f], rep, b, i, row[i],
                                  want);
                }
            }
            free(k);
            free(codes);
            free(scales);
            free(kb);
        }
    ck_assert_msg(nan_e4m3 > 0, "no E4M3 key past 464: the unsaturated cast was not exercised");
}
END_TEST

START_TEST(test_rope_blocks_are_the_models)
{
    lowp_qsa_config c = lowp_qsa_config_default();
    size_t nb = 300, h = c.rotary_dim / 2;
    float *t = lowp_test_xmalloc(nb * h * 2 * sizeof *t), cs[64], sn[64];
    ck_assert_int_eq(lowp_qsa_rope_blocks(&c, nb, t, NULL, 0), 0);
    for (size_t b = 0; b < nb; b += 7) {
        ck_assert_int_eq(lowp_qsa_rope_table(&c, b * c.ratio, cs, sn, NULL, 0), 0);
        for (size_t i = 0; i < h; i++) {
            ck_assert(lowp_f32_bits(t[(b * h + i) * 2]) == lowp_f32_bits(cs[i]));
            ck_assert(lowp_f32_bits(t[(b * h + i) * 2 + 1]) == lowp_f32_bits(sn[i]));
        }
    }
    free(t);
}
END_TEST

/* one batch: sparse decode through the view == dense decode of a cache of the selection */
static void sparse_vs_dense(lowp_block_format f, size_t P, size_t H, size_t G, size_t D, size_t B)
{
    char why[256];
    size_t NQ = H * G, np_tot = 0, *len = lowp_test_xmalloc(B * sizeof *len);
    int32_t *ip = lowp_test_xmalloc((B + 1) * sizeof *ip), *ls = lowp_test_xmalloc(B * sizeof *ls);
    ip[0] = 0;
    for (size_t b = 0; b < B; b++) {
        len[b] = 1 + lowp_splitmix64(&rng_state) % 300;
        size_t np = (len[b] + P - 1) / P;
        ip[b + 1] = ip[b] + (int32_t)np;
        ls[b] = (int32_t)(len[b] - (np - 1) * P);
        np_tot += np;
    }
    lowp_kv_config cfg = lowp_kv_config_default(f, np_tot + 3, P, H, D, D);
    int32_t *ix = lowp_test_xmalloc((np_tot + 3) * sizeof *ix);
    for (size_t i = 0; i < np_tot + 3; i++)
        ix[i] = (int32_t)i;
    for (size_t i = np_tot + 3; i > 1; i--) { /* shuffled pages */
        size_t j = lowp_splitmix64(&rng_state) % i;
        int32_t t = ix[i - 1];
        ix[i - 1] = ix[j];
        ix[j] = t;
    }
    lowp_kvcache *kc = NULL, *view = NULL, *dense = NULL;
    ck_assert_msg(lowp_kvcache_create(&cfg, &kc, why, sizeof why) == 0, "%s", why);
    if (f != LOWP_BF16_PASS) {
        float g[2] = {0.5f, 2.0f};
        ck_assert(lowp_kvcache_set_global_scales(kc, &g[0], &g[1], 1, NULL, 0) == 0);
    }
    lowp_kv_page_table pt = {B, ip, ix, ls};
    float *kv = lowp_test_xmalloc(len[0] * 0 + H * 2 * D * sizeof *kv);
    float **tok_kv = lowp_test_xmalloc(B * 300 * sizeof *tok_kv);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < len[b]; t++) {
            float *x = lowp_test_xmalloc(H * 2 * D * sizeof *x);
            for (size_t i = 0; i < H * 2 * D; i++)
                x[i] = bfv(gauss());
            ck_assert(lowp_kvcache_write_pos(kc, &pt, b, t, x, x + H * D, NULL, NULL, why, sizeof why) == 0);
            tok_kv[b * 300 + t] = x;
        }
    /* the selection: every other token, or blocks of 4, or one */
    int32_t *sel = lowp_test_xmalloc(B * 300 * sizeof *sel), *rows = lowp_test_xmalloc(B * 300 * sizeof *rows);
    int32_t *sip = lowp_test_xmalloc((B + 1) * sizeof *sip), *sl = lowp_test_xmalloc(B * sizeof *sl);
    sip[0] = 0;
    size_t maxn = 0;
    for (size_t b = 0; b < B; b++) {
        size_t n = 0, kind = b % 3;
        for (size_t t = 0; t < len[b]; t++)
            if ((kind == 0 && t % 2 == 0) || (kind == 1 && (t / 4) % 3 != 1) || (kind == 2 && t == len[b] / 2))
                sel[sip[b] + n++] = (int32_t)t;
        ck_assert(lowp_select_gather_rows(&pt, P, b, sel + sip[b], n, rows + sip[b], why, sizeof why) == 0);
        sip[b + 1] = sip[b] + (int32_t)n;
        sl[b] = 1;
        maxn = n > maxn ? n : maxn;
    }
    uint16_t *q = lowp_test_xmalloc(B * NQ * D * sizeof *q);
    for (size_t i = 0; i < B * NQ * D; i++)
        q[i] = lowp_bf16_from_f32((float)gauss());
    uint16_t *o1 = lowp_test_xmalloc(B * NQ * D * 2), *o2 = lowp_test_xmalloc(B * NQ * D * 2);
    lowp_kv_page_table spt = {B, sip, rows, sl};
    ck_assert_msg(lowp_select_gather_cache(kc, &view, why, sizeof why) == 0, "%s", why);
    lowp_kv_view vv = lowp_kvcache_view(view);
    lowp_gpu_decode_args a = {.cache = view, .view = &vv, .pt = &spt, .num_q_heads = NQ, .q = q, .threads = 1};
    ck_assert_msg(lowp_gpu_decode_emulate(&a, o1, why, sizeof why) == 0, "%s", why);
    /* the independent dense cache: the selected tokens written in order, pages of 16 */
    size_t dp = 0;
    int32_t *dip = lowp_test_xmalloc((B + 1) * sizeof *dip), *dl = lowp_test_xmalloc(B * sizeof *dl);
    dip[0] = 0;
    for (size_t b = 0; b < B; b++) {
        size_t n = (size_t)(sip[b + 1] - sip[b]), np = (n + 15) / 16;
        dip[b + 1] = dip[b] + (int32_t)np;
        dl[b] = (int32_t)(n - (np - 1) * 16);
        dp += np;
    }
    int32_t *dix = lowp_test_xmalloc((dp + 1) * sizeof *dix);
    for (size_t i = 0; i < dp; i++)
        dix[i] = (int32_t)(dp - 1 - i); /* reversed pages */
    lowp_kv_config dcfg = cfg;
    dcfg.num_pages = dp;
    dcfg.page_size = 16;
    ck_assert(lowp_kvcache_create(&dcfg, &dense, why, sizeof why) == 0);
    if (f != LOWP_BF16_PASS) {
        float g[2] = {0.5f, 2.0f};
        ck_assert(lowp_kvcache_set_global_scales(dense, &g[0], &g[1], 1, NULL, 0) == 0);
    }
    lowp_kv_page_table dpt = {B, dip, dix, dl};
    for (size_t b = 0; b < B; b++)
        for (int32_t i = 0; i < sip[b + 1] - sip[b]; i++) {
            const float *x = tok_kv[b * 300 + (size_t)sel[sip[b] + i]];
            ck_assert(lowp_kvcache_write_pos(dense, &dpt, b, (size_t)i, x, x + H * D, NULL, NULL, why, sizeof why) == 0);
        }
    lowp_kv_view dv = lowp_kvcache_view(dense);
    lowp_gpu_decode_args a2 = {.cache = dense, .view = &dv, .pt = &dpt, .num_q_heads = NQ, .q = q, .threads = 1};
    ck_assert_msg(lowp_gpu_decode_emulate(&a2, o2, why, sizeof why) == 0, "%s", why);
    for (size_t i = 0; i < B * NQ * D; i++)
        ck_assert_msg(o1[i] == o2[i], "format %d page %zu: output %zu: gathered 0x%04x dense 0x%04x", (int)f, P, i,
                      o1[i], o2[i]);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < len[b]; t++)
            free(tok_kv[b * 300 + t]);
    lowp_kvcache_destroy(kc);
    lowp_kvcache_destroy(view);
    lowp_kvcache_destroy(dense);
    free(len), free(ip), free(ls), free(ix), free(kv), free(tok_kv), free(sel), free(rows), free(sip), free(sl);
    free(q), free(o1), free(o2), free(dip), free(dl), free(dix);
}

START_TEST(test_sparse_decode_view_equals_dense_of_selection)
{
    rng_state = lowp_test_seed("test_select_gpu", 20);
    sparse_vs_dense(LOWP_BF16_PASS, 1, 2, 4, 64, 3);
    sparse_vs_dense(LOWP_FP8_E4M3, 16, 1, 8, 128, 3);
    sparse_vs_dense(LOWP_NVFP4, 64, 2, 2, 64, 3);
    sparse_vs_dense(LOWP_NVFP4, 4, 1, 16, 128, 2);
}
END_TEST

START_TEST(test_gather_refusals)
{
    char why[256] = "";
    lowp_kv_config m = lowp_kv_config_default(LOWP_NVFP4, 4, 16, 2, 64, 64), v;
    ck_assert_int_eq(lowp_select_gather_config(&m, &v, why, sizeof why), 0);
    ck_assert_uint_eq(v.page_size, 1);
    ck_assert_uint_eq(v.num_pages, 64);
    m.layout = LOWP_KV_HND;
    ck_assert_int_eq(lowp_select_gather_config(&m, &v, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "HND"));
    m.layout = LOWP_KV_NHD;
    m.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    ck_assert_int_eq(lowp_select_gather_config(&m, &v, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "interleaved"));
    const int32_t ip[] = {0, 2}, ix[] = {3, 1}, ls[] = {5};
    lowp_kv_page_table pt = {1, ip, ix, ls};
    const int32_t tok[] = {0, 15, 16, 20}, bad[] = {21}, neg[] = {-1};
    int32_t rows[4];
    ck_assert_int_eq(lowp_select_gather_rows(&pt, 16, 0, tok, 4, rows, why, sizeof why), 0);
    ck_assert_int_eq(rows[0], 48);
    ck_assert_int_eq(rows[1], 63);
    ck_assert_int_eq(rows[2], 16);
    ck_assert_int_eq(rows[3], 20);
    ck_assert_int_eq(lowp_select_gather_rows(&pt, 16, 0, bad, 1, rows, why, sizeof why), -1);
    ck_assert_int_eq(lowp_select_gather_rows(&pt, 16, 0, neg, 1, rows, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "negative"));
}
END_TEST

static Suite *select_gpu_suite(void)
{
    Suite *s = suite_create("select_gpu");
    TCase *t = tcase_create("select_gpu");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, test_keycache_bytes_decode_to_the_model);
    tcase_add_test(t, test_rope_blocks_are_the_models);
    tcase_add_test(t, test_sparse_decode_view_equals_dense_of_selection);
    tcase_add_test(t, test_gather_refusals);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return lowp_test_main(select_gpu_suite(), LOWP_TEST_FORK); }
