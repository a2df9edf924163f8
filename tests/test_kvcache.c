/* tests/test_kvcache.c: the paged KV cache (lowp/kvcache.h).
 *
 * Expected values never come from the cache itself:
 *   - bytes: lowp_block_quantize on the same token row with the same recipe and global
 *     scale (the cache must place them unchanged), at byte offsets this file computes from
 *     the layouts stated in kvcache.h (NHD [page][slot][head], HND [page][head][slot]) and
 *     the TRT-LLM flat interleave (t/4)*4*S + s*4 + t%4 (ref/notes/kernels.md 2.2), independently
 *     of lowp_kvcache_scale_offset;
 *   - values: lowp_block_dequantize_f64 of those bytes;
 *   - interleave spot values from SGLang's unit test (ref/notes/kernels.md 1.8): S = 8,
 *     (3,7) -> (3,7) and (1,4) -> (2,1).
 * Adversarial cases from ref/notes/kernels.md section 6: shuffled page indices (SGLang randperm
 * scatter), num_heads == page_size (vLLM #53681), a V-scale order mismatch between writer
 * and reader (vLLM #50085), head counts 12 and 20 (vLLM #51011), QK dim 192 vs VO dim 128
 * (FlashInfer #4976), non-unit K != V scales (FlashInfer #4979), page copies keeping scales
 * (sglang #29913), NaN-poisoned unused slots (FlashInfer's 0x7F fill).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lowp/kvcache.h"
#include "lowp_test.h"

/* ---- helpers ---------------------------------------------------------------------- */

/* The draws: lowp_splitmix64 from this state, which each test sets to its own seed. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
    return lowp_splitmix64(&rng_state);
}

/* Values spread over many binades per block (so block scales differ), with exact zeros and
 * both signs. */
static void fill_row(float *x, size_t n, size_t bs)
{
    for (size_t i = 0; i < n; i += bs) {
        double base = ldexp(1.0, (int)(rng_next() % 17) - 8); /* 2^-8 .. 2^8 */
        for (size_t j = i; j < i + bs && j < n; j++) {
            uint64_t r = rng_next();
            double m = (r % 11 == 0) ? 0.0 : base * lowp_test_urand(&rng_state);
            x[j] = (float)((r & 64) ? -m : m);
        }
    }
}

static int same_bits_f64(const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0) {
            fprintf(stderr, "  element %zu: got %a expected %a\n", i, a[i], b[i]);
            return 0;
        }
    }
    return 1;
}

static size_t seq_pages(size_t len, size_t P)
{
    return (len + P - 1) / P;
}

/* Test-side addressing, written from the header's layout statement. */
static size_t t_code_off(lowp_kv_layout l, size_t P, size_t H, size_t rb, size_t page, size_t slot,
                         size_t h)
{
    return (l == LOWP_KV_NHD ? (page * P + slot) * H + h : (page * H + h) * P + slot) * rb;
}
static size_t t_scale_off(lowp_kv_layout l, lowp_kv_sf_order o, size_t P, size_t H, size_t S,
                          size_t page, size_t slot, size_t h, size_t s)
{
    size_t flat = o == LOWP_KV_SF_INTERLEAVE4 ? (slot / 4) * 4 * S + s * 4 + slot % 4
                                              : slot * S + s;
    size_t tp = flat / S, sp = flat % S;
    return l == LOWP_KV_NHD ? ((page * P + tp) * H + h) * S + sp : ((page * H + h) * P + tp) * S + sp;
}

static float case_gs(lowp_kv_which w, lowp_kv_scale_gran g, size_t h)
{
    if (g == LOWP_KV_SCALE_TENSOR)
        return w == LOWP_KV_K ? 0.75f : 1.5f; /* K != V, non-unit (FlashInfer #4979) */
    /* per head: K 0.5 .. 2.375, V 1 .. 0.35; at least 256 / (6 * 448) so modelopt's
     * non-saturating scale cast (m / (6 g) > 464 -> NaN) stays finite on this data */
    return w == LOWP_KV_K ? 0.5f + 0.125f * (float)(h % 16) : 1.0f / (1.0f + 0.125f * (float)(h % 16));
}

/* ---- names, interleave -------------------------------------------------------------- */

START_TEST(test_names_and_defaults)
{
    lowp_kv_layout l;
    lowp_kv_sf_order o;
    lowp_kv_scale_gran g;
    ck_assert_str_eq(lowp_kv_layout_name(LOWP_KV_NHD), "nhd");
    ck_assert_str_eq(lowp_kv_layout_name(LOWP_KV_HND), "hnd");
    ck_assert_int_eq(lowp_kv_layout_parse("hnd", &l), 0);
    ck_assert_int_eq(l, LOWP_KV_HND);
    ck_assert_int_eq(lowp_kv_layout_parse("xyz", &l), -1);
    ck_assert_int_eq(lowp_kv_sf_order_parse("interleave4", &o), 0);
    ck_assert_int_eq(o, LOWP_KV_SF_INTERLEAVE4);
    ck_assert_int_eq(lowp_kv_scale_gran_parse("head", &g), 0);
    ck_assert_int_eq(g, LOWP_KV_SCALE_HEAD);
    lowp_kv_config c = lowp_kv_config_default(LOWP_NVFP4, 4, 16, 8, 128, 128);
    ck_assert_int_eq(c.recipe, LOWP_RECIPE_SGLANG_KV); /* SGLang ships nvfp4_kv_quantize */
    ck_assert_int_eq(c.layout, LOWP_KV_NHD);
    ck_assert_int_eq(c.v_sf_order, LOWP_KV_SF_LINEAR);
    ck_assert_int_eq(lowp_kv_config_check(&c, NULL, 0), 0);
    ck_assert_uint_eq(lowp_kv_row_code_bytes(&c, LOWP_KV_K), 64);
    ck_assert_uint_eq(lowp_kv_row_scales(&c, LOWP_KV_K), 8);
    c = lowp_kv_config_default(LOWP_BF16_PASS, 4, 16, 8, 192, 128);
    ck_assert_uint_eq(lowp_kv_row_code_bytes(&c, LOWP_KV_K), 384);
    ck_assert_uint_eq(lowp_kv_row_code_bytes(&c, LOWP_KV_V), 256);
    ck_assert_uint_eq(lowp_kv_row_scales(&c, LOWP_KV_V), 0);
}
END_TEST

START_TEST(test_interleave_spot_values_and_bijection)
{
    size_t t2, s2;
    /* SGLang nvfp4_v_scale_swizzle_indices test, S = 8 (ref/notes/kernels.md 1.8) */
    lowp_kv_sf_interleave(3, 7, 8, &t2, &s2);
    ck_assert_uint_eq(t2, 3);
    ck_assert_uint_eq(s2, 7);
    lowp_kv_sf_interleave(1, 4, 8, &t2, &s2);
    ck_assert_uint_eq(t2, 2);
    ck_assert_uint_eq(s2, 1);
    /* by hand, S = 8: (0,0)->(0,0); (0,1)->(0,4) [s' = 1*4 + 0]; (2,3)->(1,6)
     * [tok' = 0 + 3/2 = 1, s' = (3%2)*4 + 2 = 6]; (5,0)->(4,1) [4 + 0, 0*4 + 1] */
    static const size_t by_hand[][4] = {{0, 0, 0, 0}, {0, 1, 0, 4}, {2, 3, 1, 6}, {5, 0, 4, 1}};
    for (size_t i = 0; i < 4; i++) {
        lowp_kv_sf_interleave(by_hand[i][0], by_hand[i][1], 8, &t2, &s2);
        ck_assert_uint_eq(t2, by_hand[i][2]);
        ck_assert_uint_eq(s2, by_hand[i][3]);
    }
    /* the per-coordinate formula equals TRT-LLM's flat index, is a bijection of the tile,
     * and deinterleave inverts it */
    static const size_t Ss[] = {4, 8, 12, 16};
    for (size_t si = 0; si < 4; si++) {
        size_t S = Ss[si], P = 64;
        unsigned char *hit = calloc(P * S, 1);
        for (size_t t = 0; t < P; t++)
            for (size_t s = 0; s < S; s++) {
                lowp_kv_sf_interleave(t, s, S, &t2, &s2);
                ck_assert_uint_lt(t2, P);
                ck_assert_uint_lt(s2, S);
                ck_assert_uint_eq(t2 * S + s2, (t / 4) * 4 * S + s * 4 + t % 4);
                ck_assert_uint_eq(t2 / 4, t / 4); /* stays in its 4-token group */
                ck_assert(!hit[t2 * S + s2]);
                hit[t2 * S + s2] = 1;
                size_t t3, s3;
                lowp_kv_sf_deinterleave(t2, s2, S, &t3, &s3);
                ck_assert_uint_eq(t3, t);
                ck_assert_uint_eq(s3, s);
            }
        free(hit);
    }
}
END_TEST

/* ---- the round-trip matrix --------------------------------------------------------- */

typedef struct rt_case {
    lowp_block_format f;
    lowp_recipe r;
    lowp_kv_layout l;
    lowp_kv_sf_order ko, vo;
    lowp_kv_scale_gran g;
    size_t P, H, qk, vd;
} rt_case;

/* Write two sequences through a shuffled page table, then check every byte at the
 * test-computed offset, every read, both gathers, the poison in unused slots, and the
 * counts. Returns the number of problems (0 = pass). */
static int roundtrip(const rt_case *tc)
{
    char why[256];
    int bad = 0;
    size_t P = tc->P, H = tc->H, dim[2] = {tc->qk, tc->vd};
    size_t lens[2] = {P + (P >= 64 ? 5 : P / 2 + 5), 3}; /* partial last pages in both */
    size_t np0 = seq_pages(lens[0], P), np1 = seq_pages(lens[1], P);
    size_t num_pages = np0 + np1 + 2; /* two pages never used */
    lowp_kv_config cfg = lowp_kv_config_default(tc->f, num_pages, P, H, tc->qk, tc->vd);
    cfg.recipe = tc->r;
    cfg.layout = tc->l;
    cfg.k_sf_order = tc->ko;
    cfg.v_sf_order = tc->vo;
    cfg.scale_gran = tc->g;
    lowp_kvcache *c = NULL;
    if (lowp_kvcache_create(&cfg, &c, why, sizeof why)) {
        fprintf(stderr, "create: %s\n", why);
        return 1;
    }
    /* global scales */
    size_t ng = tc->g == LOWP_KV_SCALE_HEAD ? H : 1;
    float *gsv[2];
    for (int w = 0; w < 2; w++) {
        gsv[w] = malloc(H * sizeof(float));
        for (size_t h = 0; h < H; h++)
            gsv[w][h] = lowp_block_has_global_scale(tc->f) ? case_gs((lowp_kv_which)w, tc->g, h)
                                                           : 1.0f;
    }
    if (lowp_kvcache_set_global_scales(c, gsv[0], gsv[1], ng, why, sizeof why)) {
        fprintf(stderr, "set scales: %s\n", why);
        bad++;
    }
    /* shuffled page table: a random permutation of all pages, the first np0 to sequence 0 */
    int32_t *perm = malloc(num_pages * sizeof(int32_t));
    for (size_t i = 0; i < num_pages; i++)
        perm[i] = (int32_t)i;
    for (size_t i = num_pages - 1; i > 0; i--) {
        size_t j = rng_next() % (i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int32_t indptr[3] = {0, (int32_t)np0, (int32_t)(np0 + np1)};
    int32_t last[2] = {(int32_t)(lens[0] - (np0 - 1) * P), (int32_t)(lens[1] - (np1 - 1) * P)};
    lowp_kv_page_table pt = {2, indptr, perm, last};
    if (lowp_kv_page_table_check(&pt, num_pages, P, why, sizeof why)) {
        fprintf(stderr, "pt: %s\n", why);
        bad++;
    }
    for (int b = 0; b < 2; b++)
        if (lowp_kv_seq_len(&pt, P, (size_t)b) != lens[b])
            bad++;
    /* write every token, keeping the inputs */
    size_t bs = lowp_block_size(tc->f);
    float *in[2][2];
    for (int b = 0; b < 2; b++)
        for (int w = 0; w < 2; w++) {
            in[b][w] = malloc(lens[b] * H * dim[w] * sizeof(float));
            for (size_t i = 0; i < lens[b] * H; i++)
                fill_row(in[b][w] + i * dim[w], dim[w], bs);
        }
    for (int b = 0; b < 2; b++)
        for (size_t pos = 0; pos < lens[b]; pos++)
            if (lowp_kvcache_write_pos(c, &pt, (size_t)b, pos, in[b][0] + pos * H * dim[0],
                                       in[b][1] + pos * H * dim[1], NULL, NULL, why, sizeof why)) {
                fprintf(stderr, "write: %s\n", why);
                bad++;
            }
    ck_assert_uint_eq(lowp_kvcache_tokens_written(c), lens[0] + lens[1]);
    /* expectations */
    lowp_kv_view view = lowp_kvcache_view(c);
    size_t rb[2], S[2];
    lowp_quant_counts expc[2];
    memset(expc, 0, sizeof expc);
    for (int w = 0; w < 2; w++) {
        rb[w] = lowp_block_code_bytes(tc->f, dim[w]);
        S[w] = lowp_block_has_scales(tc->f) ? dim[w] / bs : 0;
    }
    uint8_t *ec = malloc(2 * tc->qk), *es = malloc(tc->qk), *gc = malloc(2 * tc->qk),
            *gsb = malloc(tc->qk);
    double *ev = malloc(tc->qk * sizeof(double)), *rd[2], *gat[2];
    for (int w = 0; w < 2; w++) {
        rd[w] = malloc(H * dim[w] * sizeof(double));
        gat[w] = malloc(lens[0] * H * dim[w] * sizeof(double));
    }
    for (int b = 0; b < 2 && !bad; b++) {
        for (int w = 0; w < 2; w++)
            if (lowp_kvcache_gather(c, &view, &pt, (size_t)b, lens[b], w == 0 ? gat[0] : NULL,
                                    w == 1 ? gat[1] : NULL, why, sizeof why)) {
                fprintf(stderr, "gather: %s\n", why);
                bad++;
            }
        for (size_t pos = 0; pos < lens[b] && !bad; pos++) {
            size_t page = (size_t)perm[indptr[b] + (int32_t)(pos / P)], slot = pos % P;
            if (lowp_kvcache_read(c, &view, page, slot, rd[0], rd[1], why, sizeof why)) {
                fprintf(stderr, "read: %s\n", why);
                bad++;
                break;
            }
            for (int w = 0; w < 2 && !bad; w++) {
                size_t nb;
                const uint8_t *codes = lowp_kvcache_buffer(c, (lowp_kv_which)w, LOWP_KV_CODES, &nb);
                const uint8_t *scl = lowp_kvcache_buffer(c, (lowp_kv_which)w, LOWP_KV_SCALES, NULL);
                for (size_t h = 0; h < H && !bad; h++) {
                    const float *x = in[b][w] + (pos * H + h) * dim[w];
                    lowp_global_scale gsc = lowp_global_scale_from_dec(tc->f, tc->r, gsv[w][h]);
                    if (lowp_block_quantize(tc->f, tc->r, gsc, 0, x, dim[w], ec, S[w] ? es : NULL,
                                            &expc[w], why, sizeof why)) {
                        fprintf(stderr, "quantize: %s\n", why);
                        bad++;
                        break;
                    }
                    size_t co = t_code_off(tc->l, P, H, rb[w], page, slot, h);
                    if (co + rb[w] > nb || memcmp(codes + co, ec, rb[w]) != 0) {
                        fprintf(stderr, "codes differ at b %d pos %zu %s head %zu\n", b, pos,
                                w ? "V" : "K", h);
                        bad++;
                    }
                    lowp_kv_sf_order o = w == 0 ? tc->ko : tc->vo;
                    for (size_t s = 0; s < S[w]; s++)
                        if (scl[t_scale_off(tc->l, o, P, H, S[w], page, slot, h, s)] != es[s]) {
                            fprintf(stderr, "scale %zu differs at b %d pos %zu %s head %zu\n", s,
                                    b, pos, w ? "V" : "K", h);
                            bad++;
                            break;
                        }
                    if (lowp_kvcache_read_row_bytes(c, &view, (lowp_kv_which)w, page, slot, h, gc,
                                                    gsb, why, sizeof why) ||
                        memcmp(gc, ec, rb[w]) != 0 || (S[w] && memcmp(gsb, es, S[w]) != 0)) {
                        fprintf(stderr, "read_row_bytes differs\n");
                        bad++;
                    }
                    lowp_block_dequantize_f64(tc->f, gsv[w][h], ec, S[w] ? es : NULL, dim[w], ev);
                    if (!same_bits_f64(rd[w] + h * dim[w], ev, dim[w]) ||
                        !same_bits_f64(gat[w] + (pos * H + h) * dim[w], ev, dim[w])) {
                        fprintf(stderr, "value differs at b %d pos %zu %s head %zu\n", b, pos,
                                w ? "V" : "K", h);
                        bad++;
                    }
                    for (size_t i = 0; i < dim[w]; i++)
                        if (isnan(gat[w][(pos * H + h) * dim[w] + i])) {
                            fprintf(stderr, "gather read a NaN (a poisoned slot?)\n");
                            bad++;
                            break;
                        }
                }
            }
        }
    }
    /* counts: the cache's totals are the sums of the quantizer's */
    for (int w = 0; w < 2 && !bad; w++) {
        const lowp_quant_counts *cc = lowp_kvcache_counts(c, (lowp_kv_which)w);
        if (memcmp(cc, &expc[w], sizeof expc[w]) != 0) {
            fprintf(stderr, "counts differ for %s\n", w ? "V" : "K");
            bad++;
        }
    }
    /* unused slots still hold the poison: the tail of each last page and the spare pages */
    for (int b = 0; b < 2 && !bad; b++) {
        size_t page = (size_t)perm[indptr[b + 1] - 1];
        for (size_t slot = (size_t)last[b]; slot < P; slot++) {
            lowp_kvcache_read(c, &view, page, slot, rd[0], rd[1], why, sizeof why);
            for (int w = 0; w < 2; w++)
                for (size_t i = 0; i < H * dim[w]; i++)
                    if (!isnan(rd[w][i])) {
                        bad++;
                        fprintf(stderr, "unused slot %zu of page %zu is not NaN\n", slot, page);
                        w = 2;
                        break;
                    }
        }
    }
    for (size_t i = np0 + np1; i < num_pages && !bad; i++) {
        lowp_kvcache_read(c, &view, (size_t)perm[i], P - 1, rd[0], rd[1], why, sizeof why);
        if (!isnan(rd[0][0]) || !isnan(rd[1][H * dim[1] - 1]))
            bad++;
    }
    if (bad)
        fprintf(stderr, "  case: %s/%s %s K %s V %s per-%s page %zu heads %zu dims %zu/%zu\n",
                lowp_block_format_name(tc->f), lowp_recipe_name(tc->r), lowp_kv_layout_name(tc->l),
                lowp_kv_sf_order_name(tc->ko), lowp_kv_sf_order_name(tc->vo),
                lowp_kv_scale_gran_name(tc->g), P, H, tc->qk, tc->vd);
    for (int b = 0; b < 2; b++)
        for (int w = 0; w < 2; w++)
            free(in[b][w]);
    for (int w = 0; w < 2; w++) {
        free(rd[w]);
        free(gat[w]);
        free(gsv[w]);
    }
    free(ec);
    free(es);
    free(gc);
    free(gsb);
    free(ev);
    free(perm);
    lowp_kvcache_destroy(c);
    return bad;
}

static const lowp_block_format rt_formats[] = {LOWP_BF16_PASS, LOWP_FP8_E4M3, LOWP_FP8_E5M2,
                                               LOWP_NVFP4,     LOWP_MXFP4,    LOWP_MXFP8};

/* Every recipe of the format x both layouts x every legal scale order pair x both scale
 * granularities (where the format has a global scale) x page sizes 1, 16, 64; head counts
 * rotate through 12, 20 and page_size; QK dim 192, VO dim 128. */
START_TEST(test_roundtrip_matrix)
{
    lowp_block_format f = rt_formats[_i];
    rng_state = 0x9E3779B97F4A7C15ull ^ (uint64_t)(_i + 1);
    static const size_t pages[] = {1, 16, 64};
    size_t rot = 0, cases = 0;
    int bad = 0;
    for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
        if (lowp_recipe_check(f, (lowp_recipe)r, NULL, 0))
            continue;
        for (int l = 0; l < 2; l++)
            for (size_t pi = 0; pi < 3; pi++) {
                size_t P = pages[pi];
                int norders = (f == LOWP_NVFP4 && P % 4 == 0) ? 2 : 1;
                for (int ko = 0; ko < norders; ko++)
                    for (int vo = 0; vo < norders; vo++)
                        for (int g = 0; g < (lowp_block_has_global_scale(f) ? 2 : 1); g++) {
                            size_t heads[3] = {12, 20, P};
                            rt_case tc = {f, (lowp_recipe)r, (lowp_kv_layout)l,
                                          (lowp_kv_sf_order)ko, (lowp_kv_sf_order)vo,
                                          (lowp_kv_scale_gran)g, P, heads[rot++ % 3], 192, 128};
                            bad += roundtrip(&tc);
                            cases++;
                        }
            }
    }
    ck_assert_uint_gt(cases, 0);
    ck_assert_int_eq(bad, 0);
}
END_TEST

/* num_heads == page_size (vLLM #53681: the writer took block_size from the wrong dim and
 * num_heads % 4 == 0 passed the only check), NVFP4 with interleaved V, both layouts, and a
 * case with both divisible by 4 but different. */
START_TEST(test_heads_equal_page_size)
{
    rng_state = 0x1234567ull;
    static const size_t ph[][2] = {{4, 4}, {16, 16}, {16, 8}, {8, 16}};
    for (size_t i = 0; i < 4; i++)
        for (int l = 0; l < 2; l++) {
            rt_case tc = {LOWP_NVFP4, LOWP_RECIPE_SGLANG_KV, (lowp_kv_layout)l, LOWP_KV_SF_LINEAR,
                          LOWP_KV_SF_INTERLEAVE4, LOWP_KV_SCALE_TENSOR, ph[i][0], ph[i][1], 128, 64};
            ck_assert_int_eq(roundtrip(&tc), 0);
        }
    /* a reader that swaps the two (page_size 8 / heads 16 for a 16 / 8 cache) fails loudly */
    char why[256];
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 2, 16, 8, 128, 128);
    cfg.layout = LOWP_KV_HND;
    cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    lowp_kv_view v = lowp_kvcache_view(c);
    v.page_size = 8;
    v.num_heads = 16;
    double *k = malloc(16 * 128 * sizeof(double));
    ck_assert_int_eq(lowp_kvcache_read(c, &v, 0, 0, k, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "view.page_size"));
    free(k);
    lowp_kvcache_destroy(c);
}
END_TEST

/* ---- refusals ------------------------------------------------------------------------ */

START_TEST(test_interleave_needs_page_size_multiple_of_4)
{
    char why[256];
    lowp_kvcache *c = (lowp_kvcache *)1;
    static const size_t bad_pages[] = {1, 2, 6, 18};
    for (size_t i = 0; i < 4; i++) {
        lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 4, bad_pages[i], 8, 128, 128);
        cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
        why[0] = 0;
        ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), -1);
        ck_assert_ptr_null(c);
        ck_assert_ptr_nonnull(strstr(why, "cfg.page_size"));
        ck_assert_ptr_nonnull(strstr(why, "multiple of 4"));
    }
    /* S = dim/16 must be a multiple of 4: dim 96 (S = 6) fails, naming the dim */
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 16, 8, 96, 128);
    cfg.k_sf_order = LOWP_KV_SF_INTERLEAVE4;
    ck_assert_int_eq(lowp_kv_config_check(&cfg, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "cfg.qk_dim"));
    /* only NVFP4 has the interleaved order */
    static const lowp_block_format others[] = {LOWP_MXFP4, LOWP_MXFP8, LOWP_FP8_E4M3,
                                               LOWP_BF16_PASS};
    for (size_t i = 0; i < 4; i++) {
        cfg = lowp_kv_config_default(others[i], 4, 16, 8, 128, 128);
        cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
        ck_assert_int_eq(lowp_kv_config_check(&cfg, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "cfg.v_sf_order"));
    }
    /* page_size 4 and 64 are fine */
    cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 4, 8, 128, 128);
    cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    ck_assert_int_eq(lowp_kv_config_check(&cfg, why, sizeof why), 0);
}
END_TEST

START_TEST(test_create_refusals_name_the_argument)
{
    char why[256];
    lowp_kvcache *c;
    struct {
        lowp_kv_config cfg;
        const char *needle;
    } cases[8];
    size_t n = 0;
    cases[n].cfg = lowp_kv_config_default(LOWP_NVFP4, 0, 16, 8, 128, 128);
    cases[n++].needle = "cfg.num_pages";
    cases[n].cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 0, 8, 128, 128);
    cases[n++].needle = "cfg.page_size";
    cases[n].cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 16, 0, 128, 128);
    cases[n++].needle = "cfg.num_heads";
    cases[n].cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 16, 8, 120, 128);
    cases[n++].needle = "cfg.qk_dim";
    cases[n].cfg = lowp_kv_config_default(LOWP_MXFP8, 4, 16, 8, 128, 48);
    cases[n++].needle = "cfg.vo_dim";
    cases[n].cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 16, 8, 128, 128);
    cases[n].cfg.recipe = LOWP_RECIPE_OCP;
    cases[n++].needle = "cfg.recipe";
    /* sizes whose byte count overflows size_t */
    cases[n].cfg = lowp_kv_config_default(LOWP_BF16_PASS, (size_t)1 << 30, (size_t)1 << 20,
                                          (size_t)1 << 16, 128, 128);
    cases[n++].needle = "overflows";
    cases[n].cfg = lowp_kv_config_default(LOWP_BF16_PASS, 4, 16, 8, 128, 128);
    cases[n].cfg.layout = (lowp_kv_layout)7;
    cases[n++].needle = "cfg.layout";
    for (size_t i = 0; i < n; i++) {
        why[0] = 0;
        ck_assert_int_eq(lowp_kvcache_create(&cases[i].cfg, &c, why, sizeof why), -1);
        ck_assert_ptr_null(c);
        if (!strstr(why, cases[i].needle))
            ck_abort_msg("case %zu: '%s' does not name %s", i, why, cases[i].needle);
    }
}
END_TEST

START_TEST(test_global_scales_checked)
{
    char why[256];
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_FP8_E4M3, 2, 4, 3, 32, 32);
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    ck_assert(lowp_kvcache_global_scale(c, LOWP_KV_K, 2) == 1.0f); /* uncalibrated default */
    static const float badv[] = {0.0f, -1.0f, INFINITY, NAN};
    for (size_t i = 0; i < 4; i++) {
        float k = 1.0f, v = badv[i];
        ck_assert_int_eq(lowp_kvcache_set_global_scales(c, &k, &v, 1, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "v[0]"));
    }
    float three[3] = {1, 2, 3};
    ck_assert_int_eq(lowp_kvcache_set_global_scales(c, three, NULL, 3, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "n = 3"));
    float k = 0.25f, v = 0.5f;
    ck_assert_int_eq(lowp_kvcache_set_global_scales(c, &k, &v, 1, why, sizeof why), 0);
    ck_assert(lowp_kvcache_global_scale(c, LOWP_KV_K, 2) == 0.25f);
    ck_assert(lowp_kvcache_global_scale(c, LOWP_KV_V, 0) == 0.5f);
    lowp_kvcache_destroy(c);
    /* per head */
    cfg.scale_gran = LOWP_KV_SCALE_HEAD;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    ck_assert_int_eq(lowp_kvcache_set_global_scales(c, three, three, 3, why, sizeof why), 0);
    ck_assert(lowp_kvcache_global_scale(c, LOWP_KV_V, 2) == 3.0f);
    lowp_kvcache_destroy(c);
    /* MX has no global scale: only 1.0 */
    cfg = lowp_kv_config_default(LOWP_MXFP4, 2, 4, 3, 32, 32);
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    ck_assert_int_eq(lowp_kvcache_set_global_scales(c, &k, NULL, 1, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "no global scale"));
    lowp_kvcache_destroy(c);
}
END_TEST

/* A cache written in one scale layout and read in another fails loudly, naming the field,
 * and writes nothing to the output (vLLM #50085). */
START_TEST(test_view_mismatch_fails_loudly)
{
    char why[256];
    rng_state = 42;
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 2, 16, 4, 128, 128);
    cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    float *x = malloc(4 * 128 * sizeof(float));
    fill_row(x, 4 * 128, 16);
    ck_assert_int_eq(lowp_kvcache_write(c, 1, 3, x, x, NULL, NULL, why, sizeof why), 0);
    double *out = malloc(4 * 128 * sizeof(double));
    struct {
        int field;
        const char *needle;
    } cases[] = {{0, "view.v_sf_order"}, {1, "view.k_sf_order"}, {2, "view.layout"},
                 {3, "view.format"},     {4, "view.scale_gran"}, {5, "view.num_heads"},
                 {6, "view.qk_dim"},     {7, "view.vo_dim"},     {8, "view.page_size"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lowp_kv_view v = lowp_kvcache_view(c);
        switch (cases[i].field) {
        case 0: v.v_sf_order = LOWP_KV_SF_LINEAR; break; /* an XQA/FA2 reader */
        case 1: v.k_sf_order = LOWP_KV_SF_INTERLEAVE4; break;
        case 2: v.layout = LOWP_KV_HND; break;
        case 3: v.format = LOWP_MXFP4; break;
        case 4: v.scale_gran = LOWP_KV_SCALE_HEAD; break;
        case 5: v.num_heads = 8; break;
        case 6: v.qk_dim = 192; break;
        case 7: v.vo_dim = 64; break;
        default: v.page_size = 4; break;
        }
        for (size_t j = 0; j < 4 * 128; j++)
            out[j] = 12345.0;
        why[0] = 0;
        ck_assert_int_eq(lowp_kvcache_read(c, &v, 1, 3, out, out, why, sizeof why), -1);
        if (!strstr(why, cases[i].needle))
            ck_abort_msg("'%s' does not name %s", why, cases[i].needle);
        for (size_t j = 0; j < 4 * 128; j++)
            ck_assert(out[j] == 12345.0);
        ck_assert_int_eq(lowp_kvcache_check_view(c, &v, NULL, 0), -1);
        uint8_t b[64];
        ck_assert_int_eq(lowp_kvcache_read_row_bytes(c, &v, LOWP_KV_V, 1, 3, 0, b, b, NULL, 0), -1);
    }
    /* the interleave message says both orders */
    lowp_kv_view v = lowp_kvcache_view(c);
    v.v_sf_order = LOWP_KV_SF_LINEAR;
    int32_t indptr[2] = {0, 1}, idx[1] = {1}, last[1] = {4};
    lowp_kv_page_table pt = {1, indptr, idx, last};
    ck_assert_int_eq(lowp_kvcache_gather(c, &v, &pt, 0, 4, out, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "linear"));
    ck_assert_ptr_nonnull(strstr(why, "interleave4"));
    ck_assert_int_eq(lowp_kvcache_read(c, NULL, 1, 3, out, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "view"));
    /* and the matching view reads */
    v = lowp_kvcache_view(c);
    ck_assert_int_eq(lowp_kvcache_read(c, &v, 1, 3, out, NULL, why, sizeof why), 0);
    free(x);
    free(out);
    lowp_kvcache_destroy(c);
}
END_TEST

START_TEST(test_bad_page_tables_name_the_argument)
{
    char why[256];
    /* 6 pages of 16; a good table: seq 0 pages {5,2} len 20, seq 1 pages {2,0,3} len 48
     * (page 2 shared: prefix reuse, TRT-LLM #2699), seq 2 empty */
    int32_t indptr[4] = {0, 2, 5, 5}, idx[5] = {5, 2, 2, 0, 3}, last[3] = {4, 16, 0};
    lowp_kv_page_table pt = {3, indptr, idx, last};
    ck_assert_int_eq(lowp_kv_page_table_check(&pt, 6, 16, why, sizeof why), 0);
    ck_assert_uint_eq(lowp_kv_seq_len(&pt, 16, 0), 20);
    ck_assert_uint_eq(lowp_kv_seq_len(&pt, 16, 1), 48);
    ck_assert_uint_eq(lowp_kv_seq_len(&pt, 16, 2), 0);
    size_t page, slot;
    ck_assert_int_eq(lowp_kv_locate(&pt, 16, 0, 17, &page, &slot, why, sizeof why), 0);
    ck_assert_uint_eq(page, 2);
    ck_assert_uint_eq(slot, 1);
    ck_assert_int_eq(lowp_kv_locate(&pt, 16, 0, 20, &page, &slot, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pos 20"));
    ck_assert_int_eq(lowp_kv_locate(&pt, 16, 3, 0, &page, &slot, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.batch"));

    struct {
        int32_t indptr[4], idx[5], last[3];
        const char *needle;
    } bad[] = {
        {{1, 2, 5, 5}, {5, 2, 2, 0, 3}, {4, 16, 0}, "pt.indptr[0]"},
        {{0, 3, 2, 5}, {5, 2, 2, 0, 3}, {4, 16, 0}, "pt.indptr[2]"},
        {{0, 2, 5, 5}, {5, 2, 6, 0, 3}, {4, 16, 0}, "pt.indices[2]"},
        {{0, 2, 5, 5}, {5, 2, 2, -1, 3}, {4, 16, 0}, "pt.indices[3]"},
        {{0, 2, 5, 5}, {5, 2, 2, 0, 3}, {0, 16, 0}, "pt.last_page_len[0]"},
        {{0, 2, 5, 5}, {5, 2, 2, 0, 3}, {4, 17, 0}, "pt.last_page_len[1]"},
        {{0, 2, 5, 5}, {5, 2, 2, 0, 3}, {4, 16, 1}, "pt.last_page_len[2]"},
        {{0, 2, 5, 5}, {5, 5, 2, 0, 3}, {4, 16, 0}, "repeats"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lowp_kv_page_table b = {3, bad[i].indptr, bad[i].idx, bad[i].last};
        why[0] = 0;
        ck_assert_int_eq(lowp_kv_page_table_check(&b, 6, 16, why, sizeof why), -1);
        if (!strstr(why, bad[i].needle))
            ck_abort_msg("case %zu: '%s' does not name %s", i, why, bad[i].needle);
    }
    lowp_kv_page_table nul = {3, NULL, idx, last};
    ck_assert_int_eq(lowp_kv_page_table_check(&nul, 6, 16, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.indptr"));
    nul.indptr = indptr;
    nul.indices = NULL;
    ck_assert_int_eq(lowp_kv_page_table_check(&nul, 6, 16, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.indices"));
    ck_assert_int_eq(lowp_kv_page_table_check(NULL, 6, 16, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt"));
    /* more pages than the cache has */
    ck_assert_int_eq(lowp_kv_page_table_check(&pt, 5, 16, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.indices[0]"));

    /* the cache's readers and writers check the sequence they use */
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_FP8_E4M3, 6, 16, 2, 32, 32);
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    lowp_kv_view v = lowp_kvcache_view(c);
    double *out = malloc(64 * 2 * 32 * sizeof(double));
    ck_assert_int_eq(lowp_kvcache_gather(c, &v, &pt, 0, 21, out, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "len 21"));
    ck_assert_int_eq(lowp_kvcache_gather(c, &v, &pt, 3, 1, out, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.batch"));
    int32_t idx_bad[5] = {5, 9, 2, 0, 3};
    lowp_kv_page_table pb = {3, indptr, idx_bad, last};
    ck_assert_int_eq(lowp_kvcache_gather(c, &v, &pb, 0, 20, out, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.indices[1]"));
    float x[64] = {0};
    ck_assert_int_eq(lowp_kvcache_write_pos(c, &pb, 0, 0, x, x, NULL, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pt.indices[1]"));
    ck_assert_int_eq(lowp_kvcache_write_pos(c, &pt, 1, 48, x, x, NULL, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "pos 48"));
    ck_assert_int_eq(lowp_kvcache_write(c, 6, 0, x, x, NULL, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "page 6"));
    ck_assert_int_eq(lowp_kvcache_write(c, 0, 16, x, x, NULL, NULL, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "slot 16"));
    ck_assert_uint_eq(lowp_kvcache_tokens_written(c), 0);
    /* shared prefix page: written once through sequence 1, read by both */
    for (size_t pos = 0; pos < 16; pos++) {
        for (size_t i = 0; i < 64; i++)
            x[i] = (float)pos + (float)i / 64.0f;
        ck_assert_int_eq(lowp_kvcache_write_pos(c, &pt, 1, pos, x, x, NULL, NULL, why, sizeof why), 0);
    }
    double *o1 = malloc(48 * 2 * 32 * sizeof(double));
    ck_assert_int_eq(lowp_kvcache_gather(c, &v, &pt, 1, 16, o1, NULL, why, sizeof why), 0);
    /* sequence 0's second page is page 2 = sequence 1's first */
    ck_assert_int_eq(lowp_kvcache_gather(c, &v, &pt, 0, 20, out, NULL, why, sizeof why), 0);
    ck_assert(same_bits_f64(out + 16 * 64, o1, 4 * 64));
    ck_assert(isnan(out[0])); /* page 5, never written: poison */
    free(o1);
    free(out);
    lowp_kvcache_destroy(c);
}
END_TEST

/* Page moves keep data, scales and the V interleave (sglang #29913 HiCache bug: data moved
 * without scales); poison fills everything. */
START_TEST(test_copy_page_and_poison)
{
    char why[256];
    rng_state = 99;
    for (int l = 0; l < 2; l++) {
        lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 3, 8, 4, 64, 128);
        cfg.layout = (lowp_kv_layout)l;
        cfg.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
        lowp_kvcache *c;
        ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
        float k[4 * 64], v[4 * 128];
        for (size_t s = 0; s < 8; s++) {
            fill_row(k, 4 * 64, 16);
            fill_row(v, 4 * 128, 16);
            ck_assert_int_eq(lowp_kvcache_write(c, 0, s, k, v, NULL, NULL, why, sizeof why), 0);
        }
        ck_assert_int_eq(lowp_kvcache_copy_page(c, 0, 2, why, sizeof why), 0);
        lowp_kv_view vw = lowp_kvcache_view(c);
        double a[4 * 128], b[4 * 128], a2[4 * 64], b2[4 * 64];
        for (size_t s = 0; s < 8; s++) {
            ck_assert_int_eq(lowp_kvcache_read(c, &vw, 0, s, a2, a, why, sizeof why), 0);
            ck_assert_int_eq(lowp_kvcache_read(c, &vw, 2, s, b2, b, why, sizeof why), 0);
            ck_assert(same_bits_f64(a, b, 4 * 128));
            ck_assert(same_bits_f64(a2, b2, 4 * 64));
            for (size_t h = 0; h < 4; h++) {
                uint8_t s0[8], s2[8];
                lowp_kvcache_read_row_bytes(c, &vw, LOWP_KV_V, 0, s, h, NULL, s0, NULL, 0);
                lowp_kvcache_read_row_bytes(c, &vw, LOWP_KV_V, 2, s, h, NULL, s2, NULL, 0);
                ck_assert_int_eq(memcmp(s0, s2, 8), 0);
            }
        }
        ck_assert_int_eq(lowp_kvcache_copy_page(c, 0, 3, why, sizeof why), -1);
        ck_assert_ptr_nonnull(strstr(why, "dst page 3"));
        /* page 1 was never written: NaN */
        ck_assert_int_eq(lowp_kvcache_read(c, &vw, 1, 7, a2, a, why, sizeof why), 0);
        for (size_t i = 0; i < 4 * 128; i++)
            ck_assert(isnan(a[i]));
        /* re-poison: every byte of every buffer */
        lowp_kvcache_poison(c, LOWP_KV_POISON);
        for (int w = 0; w < 2; w++)
            for (int p = 0; p < 2; p++) {
                size_t n;
                const uint8_t *buf = lowp_kvcache_buffer(c, (lowp_kv_which)w, (lowp_kv_part)p, &n);
                size_t n2;
                ck_assert_ptr_eq(lowp_kvcache_cbuffer(c, (lowp_kv_which)w, (lowp_kv_part)p, &n2),
                                 buf);
                ck_assert_uint_eq(n2, n);
                ck_assert_uint_eq(n, p == 0 ? 3 * 8 * 4 * (w ? 64 : 32) : 3 * 8 * 4 * (w ? 8 : 4));
                for (size_t i = 0; i < n; i++)
                    ck_assert_uint_eq(buf[i], 0xFF);
            }
        lowp_kvcache_destroy(c);
    }
}
END_TEST

/* A poisoned slot reads as NaN in every format: 0xFF is NaN in E4M3, E5M2, BF16 (0xFFFF)
 * codes, and the NVFP4/MX blocks get a NaN scale (E4M3 0xFF, E8M0 0xFF). */
START_TEST(test_poison_reads_nan_every_format)
{
    char why[256];
    for (size_t i = 0; i < sizeof rt_formats / sizeof rt_formats[0]; i++) {
        lowp_kv_config cfg = lowp_kv_config_default(rt_formats[i], 2, 4, 2, 64, 32);
        lowp_kvcache *c;
        ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
        lowp_kv_view v = lowp_kvcache_view(c);
        double k[128], vv[64];
        ck_assert_int_eq(lowp_kvcache_read(c, &v, 1, 3, k, vv, why, sizeof why), 0);
        for (size_t j = 0; j < 128; j++)
            ck_assert(isnan(k[j]));
        for (size_t j = 0; j < 64; j++)
            ck_assert(isnan(vv[j]));
        lowp_kvcache_destroy(c);
    }
    /* FlashInfer's 0x7F: NaN for E4M3 codes and scales, but 1.0 as an E8M0 scale, so MX
     * blocks are not NaN (the reason lowp's default is 0xFF) */
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_MXFP8, 1, 1, 1, 32, 32);
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    lowp_kvcache_poison(c, 0x7F);
    lowp_kv_view v = lowp_kvcache_view(c);
    double k[32];
    ck_assert_int_eq(lowp_kvcache_read(c, &v, 0, 0, k, NULL, why, sizeof why), 0);
    ck_assert(isnan(k[0])); /* the E4M3 element 0x7F is NaN itself */
    lowp_kvcache_destroy(c);
    cfg = lowp_kv_config_default(LOWP_MXFP4, 1, 1, 1, 32, 32);
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &c, why, sizeof why), 0);
    lowp_kvcache_poison(c, 0x7F);
    ck_assert_int_eq(lowp_kvcache_read(c, &v, 0, 0, k, NULL, why, sizeof why), -1); /* view */
    v = lowp_kvcache_view(c);
    ck_assert_int_eq(lowp_kvcache_read(c, &v, 0, 0, k, NULL, why, sizeof why), 0);
    /* 0x7F = E2M1 pair (0xF, 0x7): -6 (low nibble) and +6, scale 2^0 */
    ck_assert(k[0] == -6.0);
    ck_assert(k[1] == 6.0);
    lowp_kvcache_destroy(c);
}
END_TEST

/* Write through (page, slot) and through the page table land on the same bytes; counts are
 * reported per call and accumulated. */
START_TEST(test_write_pos_and_counts)
{
    char why[256];
    rng_state = 7;
    lowp_kv_config cfg = lowp_kv_config_default(LOWP_NVFP4, 4, 4, 2, 32, 32);
    cfg.scale_gran = LOWP_KV_SCALE_HEAD;
    lowp_kvcache *a, *b;
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &a, why, sizeof why), 0);
    ck_assert_int_eq(lowp_kvcache_create(&cfg, &b, why, sizeof why), 0);
    float gk[2] = {0.5f, 3.0f}, gv[2] = {0.125f, 1.0f};
    ck_assert_int_eq(lowp_kvcache_set_global_scales(a, gk, gv, 2, why, sizeof why), 0);
    ck_assert_int_eq(lowp_kvcache_set_global_scales(b, gk, gv, 2, why, sizeof why), 0);
    int32_t indptr[2] = {0, 3}, idx[3] = {3, 1, 0}, last[1] = {2};
    lowp_kv_page_table pt = {1, indptr, idx, last};
    lowp_quant_counts kc, vc;
    memset(&kc, 0, sizeof kc);
    memset(&vc, 0, sizeof vc);
    float k[64], v[64];
    for (size_t pos = 0; pos < 10; pos++) {
        fill_row(k, 64, 16);
        fill_row(v, 64, 16);
        k[5] = 1e30f; /* block scale saturates at 448, the element at 6: counted */
        ck_assert_int_eq(lowp_kvcache_write_pos(a, &pt, 0, pos, k, v, &kc, &vc, why, sizeof why), 0);
        ck_assert_int_eq(lowp_kvcache_write(b, (size_t)idx[pos / 4], pos % 4, k, v, NULL, NULL,
                                            why, sizeof why), 0);
    }
    for (int w = 0; w < 2; w++)
        for (int p = 0; p < 2; p++) {
            size_t na, nb;
            const uint8_t *ba = lowp_kvcache_buffer(a, (lowp_kv_which)w, (lowp_kv_part)p, &na);
            const uint8_t *bb = lowp_kvcache_buffer(b, (lowp_kv_which)w, (lowp_kv_part)p, &nb);
            ck_assert_uint_eq(na, nb);
            ck_assert_int_eq(memcmp(ba, bb, na), 0);
        }
    ck_assert_uint_eq(kc.elements, 10 * 64);
    ck_assert_uint_eq(kc.blocks, 10 * 4);
    ck_assert_uint_eq(vc.elements, 10 * 64);
    ck_assert_int_eq(memcmp(&kc, lowp_kvcache_counts(a, LOWP_KV_K), sizeof kc), 0);
    ck_assert_int_eq(memcmp(&vc, lowp_kvcache_counts(a, LOWP_KV_V), sizeof vc), 0);
    ck_assert_int_eq(memcmp(&kc, lowp_kvcache_counts(b, LOWP_KV_K), sizeof kc), 0);
    /* offsets: the exported helpers agree with the header's formula */
    lowp_kv_config cfg2 = lowp_kv_config_default(LOWP_NVFP4, 3, 8, 5, 128, 64);
    cfg2.layout = LOWP_KV_HND;
    cfg2.v_sf_order = LOWP_KV_SF_INTERLEAVE4;
    lowp_kvcache *c;
    ck_assert_int_eq(lowp_kvcache_create(&cfg2, &c, why, sizeof why), 0);
    for (size_t page = 0; page < 3; page++)
        for (size_t slot = 0; slot < 8; slot++)
            for (size_t h = 0; h < 5; h++) {
                ck_assert_uint_eq(lowp_kvcache_code_offset(c, LOWP_KV_K, page, slot, h),
                                  t_code_off(LOWP_KV_HND, 8, 5, 64, page, slot, h));
                ck_assert_uint_eq(lowp_kvcache_code_offset(c, LOWP_KV_V, page, slot, h),
                                  t_code_off(LOWP_KV_HND, 8, 5, 32, page, slot, h));
                for (size_t s = 0; s < 4; s++)
                    ck_assert_uint_eq(lowp_kvcache_scale_offset(c, LOWP_KV_V, page, slot, h, s),
                                      t_scale_off(LOWP_KV_HND, LOWP_KV_SF_INTERLEAVE4, 8, 5, 4,
                                                  page, slot, h, s));
            }
    lowp_kvcache_destroy(c);
    lowp_kvcache_destroy(a);
    lowp_kvcache_destroy(b);
}
END_TEST

static Suite *kvcache_suite(void)
{
    Suite *s = suite_create("kvcache");
    lowp_test_tcase(s, "api", 0,
                    LOWP_TESTS(test_names_and_defaults, test_interleave_spot_values_and_bijection,
                               test_interleave_needs_page_size_multiple_of_4,
                               test_create_refusals_name_the_argument, test_global_scales_checked,
                               test_view_mismatch_fails_loudly,
                               test_bad_page_tables_name_the_argument, test_copy_page_and_poison,
                               test_poison_reads_nan_every_format, test_write_pos_and_counts));
    TCase *rt = tcase_create("roundtrip");
    tcase_set_timeout(rt, 300);
    tcase_add_loop_test(rt, test_roundtrip_matrix, 0,
                        (int)(sizeof rt_formats / sizeof rt_formats[0]));
    tcase_add_test(rt, test_heads_equal_page_size);
    suite_add_tcase(s, rt);
    return s;
}

int main(void)
{
    return lowp_test_main(kvcache_suite(), LOWP_TEST_FORK);
}
