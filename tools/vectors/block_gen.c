/* tools/vectors/block_gen.c: lowp vectors gen-block, the design of the block test cases
 * and the writing of one JSON file per (block format, recipe). */
#define _POSIX_C_SOURCE 200809L

#include "vectors/vectors.h"

#include "cli.h"
#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle_block.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

/* =================================================================================
 * Block golden vectors: vectors/block/<format>.<recipe>.json (vectors/README.md, "Block
 * vectors"). Every expected code comes from the MPFR recipe oracle (lowp/oracle_block.h),
 * never from block.c; verify-block then holds block.c to the files.
 * ================================================================================= */

#define BV_ELEMS_1 16 /* elements of a test of a format with block size 1 */
#define BV_SOURCE_VERSION 1

/* Flags: what edge a test sits on. All are computed from the oracle's results (trace,
 * codes, counts) and the group, never from how the input was built. */
enum {
    BF_ZERO_BLOCK,
    BF_NAN_IN,
    BF_INF_IN,
    BF_DENORMAL,
    BF_SCALE_ZERO,
    BF_SCALE_SUB,
    BF_SCALE_NAN,
    BF_SCALE_MAX,
    BF_E2M1_TIE,
    BF_E4M3_TIE,
    BF_E5M2_TIE,
    BF_BF16_TIE,
    BF_E8M0_BOUNDARY,
    BF_SATURATION,
    BF_FLUSH,
    BF_GAMAX_ZERO,
    BF_GAMAX_INF,
    BF_GAMAX_NAN,
    BF_SCALE_UP,
    BF_DISAGREE,
    BF_RANDOM,
    BF_COUNT
};
static const struct {
    const char *name, *bug, *desc;
} bv_notes[BF_COUNT] = {
    {"zero-block", "EDGE_CASE",
     "Every element is +0 or -0: amax 0, the recipes' m != 0 guards and modelopt's all-zero scale "
     "1.0."},
    {"nan-in-block", "EDGE_CASE",
     "A NaN element: ignored by amax_ign (trtllm, exact, sglang-kv, MX trtllm), propagated by "
     "amax_nan (modelopt, MX ocp and rceil)."},
    {"inf-in-block", "EDGE_CASE",
     "A +-Inf element: amax Inf, the scale saturates (or is NaN for MX ocp/rceil and modelopt)."},
    {"denormal-input", "EDGE_CASE",
     "A binary32 subnormal element (no flush to zero anywhere in the recipes)."},
    {"scale-zero", "EDGE_CASE",
     "The E4M3 block scale is 0: nonzero elements are multiplied by rcp~(0) = Inf (trtllm, "
     "sglang-kv) or FLT_MAX (exact)."},
    {"scale-subnormal", "EDGE_CASE",
     "The E4M3 block scale is an E4M3 subnormal (codes 0x01..0x07)."},
    {"scale-nan", "EDGE_CASE",
     "The block scale code is NaN (E4M3 0x7f/0xff, E8M0 0xff): every element decodes to NaN."},
    {"scale-max", "EDGE_CASE",
     "The block scale is the largest finite code (E4M3 0x7e = 448, E8M0 0xfe = 2^127)."},
    {"e2m1-tie", "EDGE_CASE",
     "An element lands exactly on an E2M1 midpoint (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, or 7) "
     "after scaling: round to nearest even decides."},
    {"e4m3-tie", "EDGE_CASE",
     "An E4M3 midpoint is hit exactly: the NVFP4 block scale input (sf or s) or, for MXFP8 and FP8 "
     "E4M3, a scaled element."},
    {"e5m2-tie", "EDGE_CASE", "A scaled element lands exactly on an E5M2 midpoint."},
    {"bf16-tie", "EDGE_CASE",
     "An element lies exactly halfway between two bfloat16 values (low 16 bits 0x8000)."},
    {"e8m0-boundary", "EDGE_CASE",
     "The MX scale input is at a power-of-two boundary: m * (1/max) is a power of two (rceil, "
     "trtllm round up from there), or m is a power of two or the binary32 just below one (ocp "
     "floor)."},
    {"saturation", "EDGE_CASE",
     "A finite nonzero element is coded as the largest finite magnitude while its scaled value "
     "exceeded it (lowp_quant_counts.saturated)."},
    {"flush", "EDGE_CASE", "A finite nonzero element decodes to zero (lowp_quant_counts.flushed)."},
    {"global-amax-zero", "EDGE_CASE",
     "The group's global scale is derived from a tensor amax of 0 (trtllm: S = Inf; exact: S = 1; "
     "modelopt: g = 0; FP8: g = 1)."},
    {"global-amax-inf", "EDGE_CASE",
     "The group's global scale is derived from a tensor amax of +Inf."},
    {"global-amax-nan", "EDGE_CASE", "The group's global scale is derived from a NaN tensor amax."},
    {"scale-up", "DEFINED",
     "LOWP_BLOCK_SCALE_UP: the E4M3 block scale is rounded up (NVFP4 exact and modelopt)."},
    {"recipes-disagree", "DEFINED",
     "Another recipe of the same format gives a different scale or element code for the same input "
     "and the same stored global scale (the group's dec, and its enc for trtllm and exact); "
     "disagreesWith lists which."},
    {"random", "BASIC", "A random block with none of the other flags."},
};

typedef struct {
    float x[BV_MAX];
    int n;
    char comment[160];
} bv_test;

enum { GS_AMAX, GS_DEC, GS_NONE };

typedef struct {
    int from; /* GS_AMAX: value is a tensor amax; GS_DEC: value is the decode scale */
    float value;
    unsigned qflags; /* LOWP_BLOCK_SCALE_UP or 0 */
    char comment[200];
    bv_test *t;
    size_t n, cap;
} bv_group;

typedef struct {
    lowp_block_format f;
    lowp_recipe r;
    bv_group *g;
    size_t ng, capg;
    uint64_t rng;
} bv_file;

static int bv_uses_enc(lowp_block_format f, lowp_recipe r)
{
    return f == LOWP_NVFP4 && (r == LOWP_RECIPE_TRTLLM || r == LOWP_RECIPE_EXACT ||
                               r == LOWP_RECIPE_COMPRESSED_TENSORS);
}

static lowp_global_scale bv_gs(lowp_block_format f, lowp_recipe r, const bv_group *g)
{
    lowp_global_scale one = {1.0f, 1.0f};
    if (g->from == GS_AMAX)
        return lowp_oracle_recipe_global_scale(f, r, g->value);
    if (g->from == GS_DEC)
        return lowp_oracle_global_scale_from_dec(f, r, g->value);
    return one;
}

static bv_group *bv_group_add(bv_file *F, int from, float value, unsigned qflags, const char *fmt,
                              ...) __attribute__((format(printf, 5, 6)));

static bv_group *bv_group_add(bv_file *F, int from, float value, unsigned qflags, const char *fmt,
                              ...)
{
    if (F->ng == F->capg) {
        F->capg = F->capg ? 2 * F->capg : 8;
        F->g = realloc(F->g, F->capg * sizeof *F->g);
        if (F->g == NULL)
            lowp_cli_fail("out of memory");
    }
    bv_group *g = &F->g[F->ng++];
    memset(g, 0, sizeof *g);
    g->from = from;
    g->value = value;
    g->qflags = qflags;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->comment, sizeof g->comment, fmt, ap);
    va_end(ap);
    return g;
}

static bv_test *bv_test_add(bv_group *g, const float *x, int n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bv_test *bv_test_add(bv_group *g, const float *x, int n, const char *fmt, ...)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 32;
        g->t = realloc(g->t, g->cap * sizeof *g->t);
        if (g->t == NULL)
            lowp_cli_fail("out of memory");
    }
    bv_test *t = &g->t[g->n++];
    memset(t, 0, sizeof *t);
    memcpy(t->x, x, (size_t)n * sizeof *x);
    t->n = n;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->comment, sizeof t->comment, fmt, ap);
    va_end(ap);
    return t;
}

static void bv_file_free(bv_file *F)
{
    for (size_t i = 0; i < F->ng; i++)
        free(F->g[i].t);
    free(F->g);
}

/* ---- input builders (deterministic in F->rng) ---- */

static double bv_urand(uint64_t *s)
{
    return (double)(lowp_splitmix64(s) >> 11) * 0x1p-53;
}

static double bv_gauss(uint64_t *s)
{
    double u = bv_urand(s), v = bv_urand(s);
    if (u < 0x1p-60)
        u = 0x1p-60;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Test length: one block, or BV_ELEMS_1 elements for block size 1. */
static int bv_len(lowp_block_format f)
{
    size_t bs = lowp_oracle_block_size(f);
    return bs == 1 ? BV_ELEMS_1 : (int)bs;
}

/* Gaussian elements with largest magnitude exactly mag (at a random position, random
 * sign); the others |x| < mag. */
static void bv_gauss_block(uint64_t *s, float *x, int n, float mag)
{
    for (int i = 0; i < n; i++) {
        double v = bv_gauss(s) * (double)mag / 3.5;
        if (fabs(v) >= (double)mag)
            v = v > 0 ? 0.9 * (double)mag : -0.9 * (double)mag;
        x[i] = (float)v;
    }
    int at = (int)(bv_urand(s) * n);
    x[at] = bv_urand(s) < 0.5 ? mag : -mag;
}

static float bv_max_elem(lowp_block_format f)
{
    lowp_format ef = lowp_block_element_format(f);
    return lowp_decode_f32(ef, lowp_format_max_code(ef));
}

/* The trace of x under the file's recipe and the group. */
static void bv_trace(const bv_file *F, const bv_group *g, const float *x, int n,
                     lowp_oracle_block_trace *t)
{
    uint16_t codes[BV_MAX];
    (void)n;
    lowp_oracle_block_quantize(F->f, F->r, bv_gs(F->f, F->r, g), g->qflags, x, codes, NULL, NULL,
                               t);
}

/* Element ties of the element format, positive, increasing (midpoints of adjacent values,
 * then the overflow threshold). */
static int bv_elem_ties(lowp_format ef, double *out, int cap)
{
    int n = 0;
    uint16_t maxc = lowp_format_max_code(ef);
    for (uint32_t c = 0; c < maxc && n < cap - 1; c++)
        out[n++] =
            0.5 * (lowp_decode_f64(ef, (uint16_t)c) + lowp_decode_f64(ef, (uint16_t)(c + 1)));
    double mx = lowp_decode_f64(ef, maxc), below = lowp_decode_f64(ef, (uint16_t)(maxc - 1));
    out[n++] = mx + 0.5 * (mx - below);
    return n;
}

/* Put elements 1.. (skipping the amax element) on the given scaled values t[k] (signs
 * alternate), keeping |x| <= amax; block size 1 formats: every element is one block. */
static void bv_place(const bv_file *F, const bv_group *g, float *x, int n, const double *t, int nt,
                     int near)
{
    if (lowp_oracle_block_size(F->f) == 1) {
        lowp_oracle_block_trace tr;
        bv_trace(F, g, x, 1, &tr);
        for (int i = 0; i < n && i < nt; i++) {
            float v;
            float tv = (float)(i % 2 ? -t[i] : t[i]);
            if (lowp_oracle_solve_scaled(tr.factor, tr.divides, tv, &v) == 0)
                x[i] = near && i % 3 == 2 ? nextafterf(v, 0.0f) : v;
        }
        return;
    }
    lowp_oracle_block_trace tr;
    bv_trace(F, g, x, n, &tr);
    int at = 0;
    for (int i = 1; i < n; i++)
        if (fabsf(x[i]) > fabsf(x[at]))
            at = i;
    for (int i = 0, k = 0; i < n && k < nt; i++) {
        if (i == at)
            continue;
        float v, tv = (float)(k % 2 ? -t[k] : t[k]);
        k++;
        if (lowp_oracle_solve_scaled(tr.factor, tr.divides, tv, &v) == 0 && fabsf(v) <= tr.amax)
            x[i] = near && k % 3 == 0 ? nextafterf(v, 0.0f) : v;
    }
}

/* A block whose amax puts the scale input on target (NVFP4: sf or s; MX: the E8M0 input),
 * or one ulp below that amax. Returns 0, or -1 when no amax reaches the target. */
static int bv_scale_target(bv_file *F, const bv_group *g, float target, int below, float *x, int n)
{
    float m;
    if (lowp_oracle_amax_for_scale_in(F->f, F->r, bv_gs(F->f, F->r, g), g->qflags, target, &m) <
            0 ||
        !isfinite(m) || m == 0.0f)
        return -1;
    if (below)
        m = nextafterf(m, 0.0f);
    bv_gauss_block(&F->rng, x, n, m);
    return 0;
}

static const uint32_t bv_s58[3][3] = {
    {0x43d48c1eu, 0x43b195d8u, 0x4172e948u},
    {0x441cf392u, 0x44152797u, 0x41c25222u},
    {0x441061a7u, 0x437683cdu, 0x41f782d5u},
};

/* The common edge tests of a block-scaled group, around tensor magnitude A. */
static void bv_block_edges(bv_file *F, bv_group *g, float A, int many)
{
    int n = bv_len(F->f);
    float x[BV_MAX];
    uint64_t *s = &F->rng;
    for (int i = 0; i < n; i++)
        x[i] = 0.0f;
    bv_test_add(g, x, n, "all elements +0");
    if (many) {
        for (int i = 0; i < n; i++)
            x[i] = i % 2 ? -0.0f : 0.0f;
        bv_test_add(g, x, n, "+0 and -0 alternating");
    }
    bv_gauss_block(s, x, n, A / 2);
    x[3] = lowp_f32_from_bits(0x7fc00000u);
    bv_test_add(g, x, n, "Gaussian block with a quiet NaN at element 3");
    if (many) {
        bv_gauss_block(s, x, n, A / 2);
        x[5] = lowp_f32_from_bits(0xffa5a5a5u);
        bv_test_add(g, x, n, "Gaussian block with a negative signalling NaN at element 5");
        for (int i = 0; i < n; i++)
            x[i] = lowp_f32_from_bits(i % 2 ? 0xffc00000u : 0x7fc00001u);
        bv_test_add(g, x, n, "every element NaN");
    }
    bv_gauss_block(s, x, n, A / 2);
    x[2] = INFINITY;
    bv_test_add(g, x, n, "Gaussian block with +Inf at element 2");
    if (many) {
        bv_gauss_block(s, x, n, A / 4);
        x[0] = -INFINITY;
        x[n - 1] = INFINITY;
        bv_test_add(g, x, n, "-Inf first, +Inf last");
        for (int i = 0; i < n; i++)
            x[i] = lowp_f32_from_bits((uint32_t)(lowp_splitmix64(s) & 0x807fffffu) | 1u);
        bv_test_add(g, x, n, "binary32 subnormals only");
    }
    bv_gauss_block(s, x, n, A / 4);
    for (int i = 1; i < n; i += 2)
        x[i] = lowp_f32_from_bits((uint32_t)(lowp_splitmix64(s) & 0x807fffffu) | 1u);
    bv_test_add(g, x, n, "Gaussian block, odd elements binary32 subnormals");
    /* Element ties after scaling. */
    lowp_format ef = lowp_block_element_format(F->f);
    double et[512];
    int net = bv_elem_ties(ef, et, 512);
    double pick[BV_MAX];
    if (ef == LOWP_E2M1) {
        bv_gauss_block(s, x, n, A);
        bv_place(F, g, x, n, et, net, 0);
        bv_test_add(g, x, n, "elements scaled exactly onto every E2M1 midpoint, signs alternating");
        bv_gauss_block(s, x, n, A / 3);
        bv_place(F, g, x, n, et, net, 1);
        bv_test_add(g, x, n, "E2M1 midpoints after scaling, every third one binary32 ulp toward 0");
    } else {
        for (int k = 0; k < BV_MAX; k++)
            pick[k] = et[(size_t)(bv_urand(s) * net)];
        bv_gauss_block(s, x, n, A);
        bv_place(F, g, x, n, pick, BV_MAX, 0);
        bv_test_add(g, x, n, "elements scaled exactly onto random %s midpoints",
                    lowp_format_name(ef));
    }
    /* Scale edges. */
    if (F->f == LOWP_NVFP4) {
        static const float targets[] = {0x1.8p-8f, 0x1p-10f, 0x1p-11f, 0x1.4p-9f, 0x1.1p0f, 464.0f};
        static const char *const what[] = {
            "E4M3 subnormal scale (scale input 3*2^-9)",
            "scale input 2^-10: the tie between 0 and the smallest E4M3 subnormal",
            "scale input 2^-11: the scale underflows to 0",
            "scale input 1.25*2^-9: an E4M3 subnormal tie",
            "scale input 1.0625: an E4M3 normal tie",
            "scale input 464: the E4M3 overflow threshold"};
        for (size_t k = 0; k < sizeof targets / sizeof targets[0]; k++) {
            if (!many && k % 2)
                continue;
            if (bv_scale_target(F, g, targets[k], 0, x, n) == 0)
                bv_test_add(g, x, n, "%s", what[k]);
            if (many && k >= 1 && k != 2 && bv_scale_target(F, g, targets[k], 1, x, n) == 0)
                bv_test_add(g, x, n, "%s, amax one binary32 ulp lower", what[k]);
        }
        bv_gauss_block(s, x, n, (float)((double)A * 0x1p-24));
        bv_test_add(g, x, n, "block amax 2^-24 of the tensor amax");
    }
    /* Random. */
    bv_gauss_block(s, x, n, A);
    bv_test_add(g, x, n, "Gaussian block, amax = tensor amax");
    bv_gauss_block(s, x, n, (float)((double)A * 0x1p-7 * (1 + bv_urand(s))));
    bv_test_add(g, x, n, "Gaussian block, amax about 2^-7 of the tensor amax");
    if (many) {
        for (int i = 0; i < n; i++)
            x[i] = lowp_f32_from_bits((uint32_t)lowp_splitmix64(s));
        bv_test_add(g, x, n, "random binary32 bit patterns");
    }
}

/* NVFP4: the trtllm/exact disagreement set of the group's S, as blocks. */
static void bv_disagreement(bv_file *F, bv_group *g, float gamax, int nq_max)
{
    lowp_global_scale gt = lowp_oracle_recipe_global_scale(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gamax);
    lowp_oracle_nvfp4_diff d;
    if (lowp_oracle_nvfp4_diff_compute(gt.enc, &d) != 0)
        return;
    int n = bv_len(F->f);
    float x[BV_MAX];
    for (size_t i = 0; i < d.n_amax_runs && i < 2; i++) {
        float m = lowp_f32_from_bits(d.amax_runs[i].lo);
        bv_gauss_block(&F->rng, x, n, m);
        bv_test_add(g, x, n,
                    "trtllm/exact disagreement: block amax 0x%08" PRIx32
                    " gives scale 0x%02x under trtllm, 0x%02x under exact",
                    d.amax_runs[i].lo, d.amax_runs[i].a, d.amax_runs[i].b);
    }
    int done = 0;
    for (size_t j = 0; j < d.n_q && done < nq_max; j++) {
        const lowp_oracle_nvfp4_q_diff *qd = &d.q[j];
        if (qd->q == 0)
            continue;
        /* The largest amax whose scale code is q under both recipes. */
        uint32_t lo = 0, hi = 0x7F800000u;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            float v = lowp_f32_from_bits(mid);
            if (lowp_oracle_nvfp4_scale_code(0, gt.enc, v) > qd->q ||
                lowp_oracle_nvfp4_scale_code(1, gt.enc, v) > qd->q)
                hi = mid;
            else
                lo = mid + 1;
        }
        float m = lowp_f32_from_bits(lo - 1);
        if (lowp_oracle_nvfp4_scale_code(0, gt.enc, m) != qd->q ||
            lowp_oracle_nvfp4_scale_code(1, gt.enc, m) != qd->q)
            continue;
        bv_gauss_block(&F->rng, x, n, m);
        int at = 0;
        for (int i = 0; i < n; i++)
            if (fabsf(x[i]) == m)
                at = i;
        int placed = 0;
        for (size_t r = 0, i = 0; r < qd->n_runs && (int)i < n; r++) {
            float v = lowp_f32_from_bits(qd->runs[r].lo);
            if (!(v <= m))
                continue;
            if ((int)i == at)
                i++;
            if ((int)i >= n)
                break;
            x[i++] = placed % 2 ? -v : v;
            placed++;
        }
        if (placed == 0)
            continue;
        bv_test_add(g, x, n,
                    "trtllm/exact disagreement: scale 0x%02x under both, factors 0x%08" PRIx32
                    " / 0x%08" PRIx32 ", %d elements in the set",
                    qd->q, lowp_f32_bits(qd->o_trtllm), lowp_f32_bits(qd->o_exact), placed);
        done++;
    }
    lowp_oracle_nvfp4_diff_free(&d);
}

static void bv_build_nvfp4(bv_file *F)
{
    int n = bv_len(F->f);
    float x[BV_MAX];
    for (int k = 0; k < 3; k++) {
        float gamax = lowp_f32_from_bits(bv_s58[k][0]);
        bv_group *g =
            bv_group_add(F, GS_AMAX, gamax, 0,
                         "tensor amax 0x%08" PRIx32 " (ref/notes/formats.md 5.8, vector %d)",
                         bv_s58[k][0], k + 1);
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        x[0] = lowp_f32_from_bits(bv_s58[k][1]);
        x[1] = lowp_f32_from_bits(bv_s58[k][2]);
        x[2] = -x[1];
        bv_test_add(g, x, n,
                    "ref/notes/formats.md 5.8 vector %d: block amax 0x%08" PRIx32 ", element 0x%08" PRIx32
                    " lands on an E2M1 tie under exact, one ulp off under trtllm",
                    k + 1, bv_s58[k][1], bv_s58[k][2]);
        if (k == 0)
            bv_block_edges(F, g, gamax, 1);
        bv_disagreement(F, g, gamax, k == 0 ? 3 : 2);
    }
    bv_group *g = bv_group_add(F, GS_AMAX, 1.0f, 0, "tensor amax 1.0");
    bv_block_edges(F, g, 1.0f, 0);
    g = bv_group_add(F, GS_DEC, 1.0f, 0,
                     "decode global scale 1.0 as stored (SGLang's uncalibrated KV cache)");
    bv_block_edges(F, g, 2688.0f, 0);
    static const float specials[3] = {0.0f, INFINITY, NAN};
    static const char *const sname[3] = {"0", "+Inf", "NaN"};
    for (int k = 0; k < 3; k++) {
        g = bv_group_add(F, GS_AMAX, specials[k], 0, "tensor amax %s", sname[k]);
        for (int i = 0; i < n; i++)
            x[i] = 0.0f;
        bv_test_add(g, x, n, "all elements +0");
        bv_gauss_block(&F->rng, x, n, 3.0f);
        bv_test_add(g, x, n, "Gaussian block, amax 3");
        bv_gauss_block(&F->rng, x, n, 3.0f);
        x[4] = NAN;
        bv_test_add(g, x, n, "Gaussian block, amax 3, NaN at element 4");
        bv_gauss_block(&F->rng, x, n, 3.0f);
        x[6] = -INFINITY;
        bv_test_add(g, x, n, "Gaussian block, -Inf at element 6");
    }
    if (F->r == LOWP_RECIPE_EXACT || F->r == LOWP_RECIPE_MODELOPT) {
        float gamax = lowp_f32_from_bits(bv_s58[0][0]);
        g = bv_group_add(F, GS_AMAX, gamax, LOWP_BLOCK_SCALE_UP,
                         "tensor amax 0x%08" PRIx32
                         ", block scales rounded up (LOWP_BLOCK_SCALE_UP)",
                         bv_s58[0][0]);
        bv_block_edges(F, g, gamax, 0);
    }
}

static void bv_build_mx(bv_file *F)
{
    int n = bv_len(F->f);
    float x[BV_MAX], mx = bv_max_elem(F->f);
    bv_group *g = bv_group_add(F, GS_NONE, 1.0f, 0, "no global scale");
    bv_block_edges(F, g, 1.0f, 1);
    /* Scale selection: OCP floor vs RCEIL (ref/notes/formats.md 4.4), powers of two, extremes. */
    static const float a4[] = {3.0f, 6.0f, 6.5f, 7.0f}, a8[] = {448.0f, 480.0f, 500.0f};
    const float *a = F->f == LOWP_MXFP4 ? a4 : a8;
    int na = F->f == LOWP_MXFP4 ? 4 : 3;
    for (int k = 0; k < na; k++) {
        bv_gauss_block(&F->rng, x, n, a[k]);
        bv_test_add(g, x, n, "block amax %g (ref/notes/formats.md 4.4: OCP floor vs RCEIL)", (double)a[k]);
    }
    float p[] = {mx,
                 nextafterf(mx, INFINITY),
                 nextafterf(mx, 0.0f),
                 nextafterf(8.0f, 0.0f),
                 nextafterf(0x1p-3f, 0.0f),
                 0x1p-3f,
                 mx * 0x1p-126f,
                 0x1p-130f,
                 1e-40f,
                 0x1p127f,
                 FLT_MAX};
    static const char *const pw[] = {"block amax = largest element value",
                                     "block amax one ulp above the largest element value",
                                     "block amax one ulp below the largest element value",
                                     "block amax just below 8 (fp32 log2 rounds up to 3)",
                                     "block amax just below 2^-3",
                                     "block amax 2^-3",
                                     "block amax max * 2^-126",
                                     "block amax 2^-130: the scale clamps at 2^-127",
                                     "block amax a binary32 subnormal",
                                     "block amax 2^127",
                                     "block amax FLT_MAX"};
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++) {
        bv_gauss_block(&F->rng, x, n, p[k]);
        bv_test_add(g, x, n, "%s", pw[k]);
    }
    /* Scale inputs exactly at a power of two and one ulp below (rceil, trtllm). */
    static const float t2[] = {1.0f, 0x1p-127f, 0x1p100f};
    for (size_t k = 0; k < sizeof t2 / sizeof t2[0]; k++)
        for (int below = 0; below < 2; below++)
            if (bv_scale_target(F, g, t2[k], below, x, n) == 0)
                bv_test_add(g, x, n, "scale input %s2^%d%s", below ? "just below " : "",
                            ilogbf(t2[k]), below ? " (amax one ulp lower)" : "");
}

static void bv_fp_tests(bv_file *F, bv_group *g, float A, int many)
{
    int n = BV_ELEMS_1;
    float x[BV_MAX];
    uint64_t *s = &F->rng;
    static const uint32_t sp[BV_ELEMS_1] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,
                                            0x7fc00000u, 0xffc00000u, 0x7fa5a5a5u, 0xffffffffu,
                                            0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
                                            0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u};
    for (int i = 0; i < n; i++)
        x[i] = lowp_f32_from_bits(sp[i]);
    bv_test_add(g, x, n, "zeros, infinities, NaNs, subnormal and normal extremes");
    lowp_format ef = lowp_block_element_format(F->f);
    if (ef != LOWP_BF16) {
        double et[512], pick[BV_ELEMS_1];
        int net = bv_elem_ties(ef, et, 512);
        for (int rep = 0; rep < (many ? 3 : 1); rep++) {
            for (int k = 0; k < n; k++)
                pick[k] = et[(size_t)(bv_urand(s) * net)];
            if (rep == 0) { /* the overflow threshold, the smallest ties */
                pick[0] = et[net - 1];
                pick[1] = et[0];
                pick[2] = et[1];
            }
            bv_gauss_block(s, x, n, A);
            bv_place(F, g, x, n, pick, n, rep == 2);
            bv_test_add(g, x, n, "elements scaled exactly onto %s midpoints%s",
                        lowp_format_name(ef), rep == 2 ? ", every third one ulp toward 0" : "");
        }
        double band[BV_ELEMS_1];
        double mx = lowp_decode_f64(ef, lowp_format_max_code(ef));
        for (int k = 0; k < n; k++)
            band[k] = k < 4 ? mx : k < 8 ? et[net - 1] : k < 12 ? mx * 1.0703125 : 1e30;
        bv_gauss_block(s, x, n, A);
        bv_place(F, g, x, n, band, n, 1);
        bv_test_add(g, x, n,
                    "scaled elements in the overflow band: max, the threshold, above, 1e30");
    } else {
        for (int rep = 0; rep < 3; rep++) {
            for (int i = 0; i < n; i++) {
                uint32_t b = (uint32_t)lowp_splitmix64(s);
                b = rep == 0   ? ((b & 0xffff0000u) | 0x8000u)
                    : rep == 1 ? ((b & 0xffff0000u) | 0x7fffu)
                               : ((b & 0x807f0000u) | 0x8000u);
                if ((b & 0x7f800000u) == 0x7f800000u)
                    b &= 0xbfffffffu;
                x[i] = lowp_f32_from_bits(b);
            }
            static const char *const w[] = {"bfloat16 midpoints (low 16 bits 0x8000)",
                                            "one ulp below bfloat16 midpoints",
                                            "midpoints of bfloat16 subnormals"};
            bv_test_add(g, x, n, "%s", w[rep]);
        }
        static const uint32_t band[BV_ELEMS_1] = {
            0x7f7f0000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7f8001u, 0x7f7fffffu, 0xff7f7fffu,
            0xff7f8000u, 0x7f7e8000u, 0x00008000u, 0x80008000u, 0x00007fffu, 0x00018000u,
            0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f80ffffu};
        for (int i = 0; i < n; i++)
            x[i] = lowp_f32_from_bits(band[i]);
        bv_test_add(g, x, n, "the overflow threshold, the smallest subnormals, ties at 1");
    }
    bv_gauss_block(s, x, n, A);
    bv_test_add(g, x, n, "Gaussian elements, amax = tensor amax");
    if (many) {
        for (int i = 0; i < n; i++)
            x[i] = lowp_f32_from_bits((uint32_t)lowp_splitmix64(s));
        bv_test_add(g, x, n, "random binary32 bit patterns");
    }
}

static void bv_build_fp(bv_file *F)
{
    if (F->f == LOWP_BF16_PASS) {
        bv_group *g = bv_group_add(F, GS_NONE, 1.0f, 0, "no scale");
        bv_fp_tests(F, g, 3.0f, 1);
        return;
    }
    float mx = bv_max_elem(F->f);
    bv_group *g = bv_group_add(F, GS_AMAX, 1000.0f, 0, "tensor amax 1000");
    bv_fp_tests(F, g, 1000.0f, 1);
    g = bv_group_add(F, GS_AMAX, 0x1p-140f, 0, "tensor amax 2^-140: the decode scale underflows");
    bv_fp_tests(F, g, 0x1p-140f, 0);
    static const float specials[3] = {0.0f, INFINITY, NAN};
    static const char *const sname[3] = {"0", "+Inf", "NaN"};
    for (int k = 0; k < 3; k++) {
        g = bv_group_add(F, GS_AMAX, specials[k], 0, "tensor amax %s: decode scale 1", sname[k]);
        bv_fp_tests(F, g, mx, 0);
    }
    g = bv_group_add(F, GS_DEC, 0x1p-127f, 0,
                     "decode scale 2^-127 as stored (a binary32 subnormal)");
    bv_fp_tests(F, g, mx * 0x1p-127f, 0);
}

/* ---- evaluation with the oracle ---- */

typedef struct {
    uint8_t scale[BV_MAX]; /* per block */
    uint16_t code[BV_MAX];
    unsigned flags;    /* 1u << BF_* */
    unsigned disagree; /* 1u << recipe */
} bv_result;

static int bv_is_tie(lowp_format f, float v)
{
    if (!isfinite(v) || v == 0.0f)
        return 0;
    if (f == LOWP_BF16)
        return (lowp_f32_bits(v) & 0xffffu) == 0x8000u;
    double t[512];
    int n = bv_elem_ties(f, t, 512);
    double a = fabs((double)v);
    for (int i = 0; i < n; i++)
        if (t[i] == a)
            return 1;
    return 0;
}

static int bv_pow2(float v) /* a positive power of two (subnormals included) */
{
    if (!(v > 0.0f) || isinf(v))
        return 0;
    int e;
    return frexpf(v, &e) == 0.5f;
}

static void bv_eval_recipe(lowp_block_format f, lowp_recipe r, lowp_global_scale gs, unsigned qf,
                           const bv_test *t, uint8_t *scale, uint16_t *code, lowp_quant_counts *k,
                           lowp_oracle_block_trace *tr)
{
    size_t bs = lowp_oracle_block_size(f);
    for (int b = 0; b * (int)bs < t->n; b++)
        if (lowp_oracle_block_quantize(f, r, gs, qf, t->x + b * bs, code + b * bs, &scale[b], k,
                                       tr ? &tr[b] : NULL) != 0)
            lowp_cli_fail("vectors gen-block: the oracle has no %s %s", lowp_block_format_name(f),
                          lowp_recipe_name(r));
}

static void bv_eval(const bv_file *F, const bv_group *g, const bv_test *t, bv_result *res)
{
    lowp_block_format f = F->f;
    size_t bs = lowp_oracle_block_size(f);
    int nb = t->n / (int)bs;
    lowp_quant_counts k = {0};
    static lowp_oracle_block_trace tr[BV_MAX];
    memset(res, 0, sizeof *res);
    bv_eval_recipe(f, F->r, bv_gs(f, F->r, g), g->qflags, t, res->scale, res->code, &k, tr);
    unsigned fl = 0;
    int zero = 1;
    for (int i = 0; i < t->n; i++) {
        float v = t->x[i];
        zero &= v == 0.0f;
        if (isnan(v))
            fl |= 1u << BF_NAN_IN;
        if (isinf(v))
            fl |= 1u << BF_INF_IN;
        if (v != 0.0f && fpclassify(v) == FP_SUBNORMAL)
            fl |= 1u << BF_DENORMAL;
    }
    if (zero)
        fl |= 1u << BF_ZERO_BLOCK;
    lowp_format ef = lowp_block_element_format(f);
    unsigned tie_flag = ef == LOWP_E2M1   ? BF_E2M1_TIE
                        : ef == LOWP_E4M3 ? BF_E4M3_TIE
                        : ef == LOWP_E5M2 ? BF_E5M2_TIE
                                          : BF_BF16_TIE;
    for (int b = 0; b < nb; b++) {
        for (size_t i = 0; i < bs; i++)
            if (bv_is_tie(ef, tr[b].scaled[i]))
                fl |= 1u << tie_flag;
        if (f == LOWP_NVFP4) {
            uint8_t a = res->scale[b] & 0x7f;
            if (a == 0)
                fl |= 1u << BF_SCALE_ZERO;
            else if (a < 8)
                fl |= 1u << BF_SCALE_SUB;
            else if (a == 0x7f)
                fl |= 1u << BF_SCALE_NAN;
            else if (a == 0x7e)
                fl |= 1u << BF_SCALE_MAX;
            if (bv_is_tie(LOWP_E4M3, tr[b].scale_in))
                fl |= 1u << BF_E4M3_TIE;
        } else if (f == LOWP_MXFP4 || f == LOWP_MXFP8) {
            if (res->scale[b] == 0xff)
                fl |= 1u << BF_SCALE_NAN;
            if (res->scale[b] == 0xfe)
                fl |= 1u << BF_SCALE_MAX;
            float si = tr[b].scale_in;
            if (F->r == LOWP_RECIPE_OCP ? (bv_pow2(si) || bv_pow2(nextafterf(si, INFINITY)))
                                        : bv_pow2(si))
                fl |= 1u << BF_E8M0_BOUNDARY;
        }
    }
    if (k.saturated)
        fl |= 1u << BF_SATURATION;
    if (k.flushed)
        fl |= 1u << BF_FLUSH;
    if (g->from == GS_AMAX && g->value == 0.0f)
        fl |= 1u << BF_GAMAX_ZERO;
    if (g->from == GS_AMAX && isinf(g->value))
        fl |= 1u << BF_GAMAX_INF;
    if (g->from == GS_AMAX && isnan(g->value))
        fl |= 1u << BF_GAMAX_NAN;
    if (g->qflags & LOWP_BLOCK_SCALE_UP)
        fl |= 1u << BF_SCALE_UP;
    /* The other recipes of the format on the same input with the same stored global
     * scale: this file's (dec, enc) for a recipe that also reads enc, else its decode
     * scale dec through lowp_oracle_global_scale_from_dec. So only the block arithmetic
     * differs (a recipe's own derivation from a tensor amax is not compared: sglang-kv's
     * is always 1.0). */
    lowp_global_scale gs_this = bv_gs(f, F->r, g);
    for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
        if (r == (int)F->r || !lowp_oracle_recipe_defined(f, (lowp_recipe)r))
            continue;
        unsigned qf = (f == LOWP_NVFP4 && (r == LOWP_RECIPE_EXACT || r == LOWP_RECIPE_MODELOPT))
                          ? g->qflags
                          : 0;
        lowp_global_scale g2 = gs_this;
        if (g->from != GS_NONE && !(bv_uses_enc(f, F->r) && bv_uses_enc(f, (lowp_recipe)r)))
            g2 = lowp_oracle_global_scale_from_dec(f, (lowp_recipe)r, gs_this.dec);
        uint8_t s2[BV_MAX];
        uint16_t c2[BV_MAX];
        bv_eval_recipe(f, (lowp_recipe)r, g2, qf, t, s2, c2, NULL, NULL);
        int differ = 0;
        for (int b = 0; b < nb && lowp_block_has_scales(f); b++)
            differ |= s2[b] != res->scale[b];
        for (int i = 0; i < t->n; i++)
            differ |= c2[i] != res->code[i];
        if (differ)
            res->disagree |= 1u << r;
    }
    if (res->disagree)
        fl |= 1u << BF_DISAGREE;
    if (fl == 0)
        fl = 1u << BF_RANDOM;
    res->flags = fl;
}

/* ---- writing ---- */

void lowp_vec_bv_file_name(char *buf, size_t len, lowp_block_format f, lowp_recipe r)
{
    snprintf(buf, len, "%s.%s.json", lowp_block_format_name(f), lowp_recipe_name(r));
}

static void bv_write(const char *dir, bv_file *F, uint64_t seed, const char *commit)
{
    lowp_block_format f = F->f;
    lowp_recipe r = F->r;
    lowp_format ef = lowp_block_element_format(f);
    int d = lowp_vec_code_digits(ef), has_scale = lowp_block_has_scales(f);
    size_t ntests = 0;
    for (size_t i = 0; i < F->ng; i++)
        ntests += F->g[i].n;
    char name[64], path[4352];
    lowp_vec_bv_file_name(name, sizeof name, f, r);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *o = lowp_out_open(path, 0);
    fprintf(o, "{\n");
    fprintf(o, "  \"algorithm\": \"lowp block quantize %s/%s\",\n", lowp_block_format_name(f),
            lowp_recipe_name(r));
    fprintf(o, "  \"schema\": \"" BV_SCHEMA "\",\n");
    fprintf(o, "  \"generatorVersion\": \"lowp " LOWP_VERSION "\",\n");
    fprintf(o, "  \"lowpCommit\": \"%s\",\n", commit);
    fprintf(o, "  \"seed\": \"0x%" PRIx64 "\",\n", seed);
    fprintf(o, "  \"format\": \"%s\",\n", lowp_block_format_name(f));
    fprintf(o, "  \"recipe\": \"%s\",\n", lowp_recipe_name(r));
    fprintf(o, "  \"blockSize\": %zu,\n", lowp_oracle_block_size(f));
    fprintf(o, "  \"elementFormat\": \"%s\",\n", lowp_format_name(ef));
    fprintf(o, "  \"scaleFormat\": \"%s\",\n",
            f == LOWP_NVFP4 ? "e4m3"
            : has_scale     ? "e8m0"
                            : "none");
    fprintf(o, "  \"numberOfTests\": %zu,\n", ntests);
    fprintf(o, "  \"header\": [\n");
    fprintf(o,
            "    \"Generated by: lowp vectors gen-block --seed 0x%" PRIx64
            " (expected codes from the MPFR recipe oracle, ref/oracle/src/oracle_block.c).\",\n",
            seed);
    fprintf(o,
            "    \"Recipe: ref/recipes.md, %s, %s. Format of this file: vectors/README.md, Block "
            "vectors.\",\n",
            f == LOWP_NVFP4                        ? "NVFP4"
            : (f == LOWP_MXFP4 || f == LOWP_MXFP8) ? "MXFP4 / MXFP8"
            : f == LOWP_BF16_PASS                  ? "BF16 passthrough"
                                                   : "FP8 per-tensor",
            lowp_recipe_name(r));
    fprintf(o,
            "    \"input: binary32 bit patterns, 8 hex digits each, element 0 first. codes: one "
            "per element, %d hex digit%s. scales: one %s code per block, 2 hex digits%s.\",\n",
            d, d > 1 ? "s" : "",
            f == LOWP_NVFP4 ? "E4M3"
            : has_scale     ? "E8M0"
                            : "(none)",
            has_scale ? "" : "; absent here");
    fprintf(o, "    \"globalScaleDec / globalScaleEnc: the binary32 bits of lowp_global_scale .dec "
               "and .enc that the recipe reads (absent: not read); globalAmax: the tensor amax "
               "they were derived from by the recipe's own rule.\"\n");
    fprintf(o, "  ],\n");
    fprintf(o, "  \"notes\": {\n");
    for (int k = 0; k < BF_COUNT; k++)
        fprintf(o, "    \"%s\": {\"bugType\": \"%s\", \"description\": \"%s\"}%s\n",
                bv_notes[k].name, bv_notes[k].bug, bv_notes[k].desc, k + 1 < BF_COUNT ? "," : "");
    fprintf(o, "  },\n");
    fprintf(o, "  \"testGroups\": [\n");
    long tc = 0;
    for (size_t gi = 0; gi < F->ng; gi++) {
        bv_group *g = &F->g[gi];
        lowp_global_scale gs = bv_gs(f, r, g);
        fprintf(o,
                "    {\"type\": \"BlockQuantizeTest\", \"source\": {\"name\": \"lowp vectors "
                "gen-block\", \"version\": %d}, \"comment\": \"%s\", ",
                BV_SOURCE_VERSION, g->comment);
        fprintf(o, "\"globalScaleFrom\": \"%s\", ",
                g->from == GS_AMAX  ? "amax"
                : g->from == GS_DEC ? "dec"
                                    : "none");
        if (g->from == GS_AMAX)
            fprintf(o, "\"globalAmax\": \"%08" PRIx32 "\", ", lowp_f32_bits(g->value));
        if (lowp_block_has_global_scale(f))
            fprintf(o, "\"globalScaleDec\": \"%08" PRIx32 "\", ", lowp_f32_bits(gs.dec));
        if (bv_uses_enc(f, r))
            fprintf(o, "\"globalScaleEnc\": \"%08" PRIx32 "\", ", lowp_f32_bits(gs.enc));
        fprintf(o, "\"scaleUp\": %s, \"tests\": [\n", g->qflags ? "true" : "false");
        for (size_t ti = 0; ti < g->n; ti++) {
            bv_test *t = &g->t[ti];
            bv_result res;
            bv_eval(F, g, t, &res);
            fprintf(o, "      {\"tcId\": %ld, \"comment\": \"%s\", \"flags\": [", ++tc, t->comment);
            int first = 1;
            for (int k = 0; k < BF_COUNT; k++)
                if (res.flags & (1u << k)) {
                    fprintf(o, "%s\"%s\"", first ? "" : ", ", bv_notes[k].name);
                    first = 0;
                }
            fprintf(o, "], \"input\": [");
            for (int i = 0; i < t->n; i++)
                fprintf(o, "%s\"%08" PRIx32 "\"", i ? ", " : "", lowp_f32_bits(t->x[i]));
            fprintf(o, "]");
            if (has_scale) {
                fprintf(o, ", \"scales\": [");
                for (int b = 0; b * (int)lowp_oracle_block_size(f) < t->n; b++)
                    fprintf(o, "%s\"%02x\"", b ? ", " : "", res.scale[b]);
                fprintf(o, "]");
            }
            fprintf(o, ", \"codes\": [");
            for (int i = 0; i < t->n; i++)
                fprintf(o, "%s\"%0*x\"", i ? ", " : "", d, res.code[i]);
            fprintf(o, "], \"disagreesWith\": [");
            first = 1;
            for (int k = 0; k < LOWP_RECIPE_COUNT; k++)
                if (res.disagree & (1u << k)) {
                    fprintf(o, "%s\"%s\"", first ? "" : ", ", lowp_recipe_name((lowp_recipe)k));
                    first = 0;
                }
            fprintf(o, "], \"result\": \"valid\"}%s\n", ti + 1 < g->n ? "," : "");
        }
        fprintf(o, "    ]}%s\n", gi + 1 < F->ng ? "," : "");
    }
    fprintf(o, "  ]\n}\n");
    lowp_out_commit(o);
}

int lowp_vec_bv_is_file_name(const char *s)
{
    size_t n = strlen(s);
    return n > 5 && strcmp(s + n - 5, ".json") == 0;
}

static void bv_build(bv_file *F, lowp_block_format f, lowp_recipe r, uint64_t seed)
{
    memset(F, 0, sizeof *F);
    F->f = f;
    F->r = r;
    /* Inputs depend on (seed, format, recipe) only. */
    F->rng = seed ^ (UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(1 + f * LOWP_RECIPE_COUNT + r));
    if (f == LOWP_NVFP4)
        bv_build_nvfp4(F);
    else if (f == LOWP_MXFP4 || f == LOWP_MXFP8)
        bv_build_mx(F);
    else
        bv_build_fp(F);
}

static void gen_block_usage(FILE *f)
{
    fprintf(f,
            "usage: lowp vectors gen-block [--dir DIR] [--seed S] [--commit C]\n"
            "  Write one JSON file per (block format, recipe) that lowp_recipe_check accepts,\n"
            "  expected codes from the MPFR recipe oracle.\n"
            "  --dir DIR    output directory (default " BV_DEFAULT_DIR "; created if missing;\n"
            "               stale *.json files in it are removed)\n"
            "  --seed S     seed of the random inputs (default 0x%" PRIx64 ")\n"
            "  --commit C   commit recorded in the files (default: git rev-parse --short=12\n"
            "               HEAD of the source tree, or \"unknown\")\n",
            (uint64_t)LOWP_DEFAULT_SEED);
}

int lowp_vec_cmd_gen_block(int argc, char **argv)
{
    const char *dir = BV_DEFAULT_DIR;
    uint64_t seed = LOWP_DEFAULT_SEED;
    char commit[80];
    if (lowp_vec_gen_start(argc, argv, "gen-block", gen_block_usage, &dir, &seed, commit,
                           sizeof commit))
        return LOWP_EXIT_OK;
    name_list written = {0};
    size_t files = 0, tests = 0;
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) != 0)
                continue;
            bv_file F;
            bv_build(&F, (lowp_block_format)f, (lowp_recipe)r, seed);
            bv_write(dir, &F, seed, commit);
            for (size_t i = 0; i < F.ng; i++)
                tests += F.g[i].n;
            char name[64];
            lowp_vec_bv_file_name(name, sizeof name, (lowp_block_format)f, (lowp_recipe)r);
            lowp_vec_name_list_add(&written, name);
            files++;
            bv_file_free(&F);
        }
    lowp_vec_remove_stale(dir, lowp_vec_bv_is_file_name, &written);
    free(written.names);
    printf("wrote %zu block vector files, %zu tests, to %s (seed 0x%" PRIx64 ", commit %s)\n",
           files, tests, dir, seed, commit);
    return LOWP_EXIT_OK;
}
