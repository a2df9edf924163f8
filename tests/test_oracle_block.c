/* tests/test_oracle_block.c: lowp_block_quantize (block.c) against the MPFR recipe oracle
 * (oracle_block.c), bit for bit, the way TestFloat checks SoftFloat against slowfloat.
 *
 *   test_oracle_block [--full]
 *
 * For every (format, recipe) that lowp_recipe_check accepts, and with LOWP_BLOCK_SCALE_UP for
 * every NVFP4 recipe (it rounds the scale up for exact and modelopt, and must change nothing
 * for trtllm and sglang-kv, which recipes.md gives no such step): the scale code and every
 * element code of random blocks, and the counts, drawn from several distributions under
 * many global scales:
 *   gaussian      Gaussian blocks at magnitudes spread around the tensor amax
 *   specials      the same with NaN (both signs, payloads), +-Inf, +-0, subnormals inserted
 *   bits          uniformly random bit patterns
 *   tiny          blocks far below the tensor amax: E4M3 scales subnormal or zero
 *   ties          elements placed exactly on element-format ties after scaling
 *   scale-ties    block amax placed so the scale input lands on an E4M3 tie (NVFP4) or a
 *                 power of two (MX), and one binary32 ulp below
 *   structured    zero, +-0, all-NaN, all-Inf, constant, single-element blocks
 * Global scales come from a tensor amax through the recipe's derivation, or from a decode
 * scale, including 0, Inf, NaN, subnormal and FLT_MAX ones. Quick tier: QUICK_BLOCKS per
 * case set; --full: FULL_BLOCKS (OpenMP, with progress on a terminal).
 *
 * Also: every special global scale times a fixed set of special blocks (the grid); the
 * oracle's tables and binary32 arithmetic; the global-scale derivations; every
 * vector in vectors/block (LOWP_VECTORS_DIR overrides, default from this file's path);
 * the NVFP4 trtllm/exact disagreement set (lowp_oracle_nvfp4_diff_compute) against a
 * brute-force scan with native binary32 arithmetic, and against block.c on blocks made
 * from it. Its counts are printed ("disagreement S=...").
 *
 * One line per mismatch, at most MAX_REPORT per case set; the seed (env LOWP_SEED,
 * default LOWP_DEFAULT_SEED) is printed first; the last line is the summary
 * "oracle_block: N cases, M mismatches". Deterministic: a batch's blocks are a function of
 * (seed, case set, batch index) only, whatever the thread count.
 */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <dirent.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lowp/block.h"
#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/oracle.h"
#include "lowp/oracle_block.h"
#include "lowp_test.h"

#define MAX_REPORT 20
#define QUICK_BLOCKS 4096L      /* per case set */
#define FULL_BLOCKS 10000000L   /* per (format, recipe), flags 0 */
#define FULL_BLOCKS_UP 2000000L /* LOWP_BLOCK_SCALE_UP case sets */
#define BATCH_BLOCKS 256        /* blocks sharing one global scale */
#define BATCH_ELEMS_1 4096      /* elements of a batch of a format with block size 1 */
#define MAXB LOWP_ORACLE_BLOCK_MAX

static int full;
static uint64_t seed = LOWP_DEFAULT_SEED;
static unsigned long long total_cases, total_bad;

/* ---------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------- */

/* Equal as a global-scale field: same bits, or both NaN (recipes.md fixes no payload). */
static int same_scale_value(float a, float b)
{
    return lowp_f32_bits(a) == lowp_f32_bits(b) || (isnan(a) && isnan(b));
}

static unsigned urange(uint64_t *s, unsigned n) /* [0, n) */
{
    return (unsigned)(lowp_test_urand(s) * n);
}

static int code_digits(lowp_block_format f)
{
    return (int)(lowp_format_bits(lowp_block_element_format(f)) + 3) / 4;
}

static int progress_wanted(void)
{
    return isatty(STDERR_FILENO);
}

/* A case set: counts and the TestFloat-style report limit. */
typedef struct {
    char label[64];
    unsigned long long n, bad;
} tally;

static int tally_show(tally *t)
{
    unsigned long long k;
#pragma omp atomic capture
    k = ++t->bad;
    if (k == MAX_REPORT + 1)
        printf("%s: further mismatches not shown\n", t->label);
    return k <= MAX_REPORT;
}

static void tally_end(tally *t)
{
    if (t->bad)
        printf("%s: %llu of %llu mismatch\n", t->label, t->bad, t->n);
    total_cases += t->n;
    total_bad += t->bad;
}

/* ---------------------------------------------------------------------------------------
 * Combinations under test.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    lowp_block_format f;
    lowp_recipe r;
    unsigned flags;
} combo;

static combo combos[LOWP_BLOCK_FORMAT_COUNT * LOWP_RECIPE_COUNT * 2];
static int n_combos;

/* LOWP_BLOCK_SCALE_UP is defined for NVFP4 exact and modelopt (block.h, recipes.md); for
 * trtllm and sglang-kv recipes.md has no such step, so the flag must change nothing there
 * (oracle_block.c R8). All four are case sets. */
static int scale_up_defined(lowp_block_format f, lowp_recipe r)
{
    (void)r;
    return f == LOWP_NVFP4;
}

static void build_combos(void)
{
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            if (lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) != 0)
                continue;
            combos[n_combos++] = (combo){(lowp_block_format)f, (lowp_recipe)r, 0};
            if (scale_up_defined((lowp_block_format)f, (lowp_recipe)r))
                combos[n_combos++] =
                    (combo){(lowp_block_format)f, (lowp_recipe)r, LOWP_BLOCK_SCALE_UP};
        }
}

static void combo_label(const combo *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s%s", lowp_block_format_name(c->f), lowp_recipe_name(c->r),
             c->flags ? "+scale-up" : "");
}

/* ---------------------------------------------------------------------------------------
 * Element-format ties (midpoints between adjacent positive values, the overflow threshold
 * and the underflow midpoint), for placing elements and scales on them.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    float v[512];
    int n;
} tie_list;

static tie_list ties[LOWP_FORMAT_COUNT];

static void build_ties(lowp_format f, uint16_t maxc)
{
    tie_list *t = &ties[f];
    t->n = 0;
    for (uint32_t c = 0; c < maxc && t->n < 510; c++) {
        double a = lowp_oracle_decode(f, (uint16_t)c), b = lowp_oracle_decode(f, (uint16_t)(c + 1));
        t->v[t->n++] = (float)(0.5 * (a + b)); /* exact: one more bit than the format */
    }
    double mx = lowp_oracle_decode(f, maxc), below = lowp_oracle_decode(f, (uint16_t)(maxc - 1));
    t->v[t->n++] = (float)(mx + 0.5 * (mx - below)); /* the overflow threshold */
}

/* A random tie of element format f (BF16: a random midpoint of two adjacent codes). */
static float random_tie(lowp_format f, uint64_t *s)
{
    if (f == LOWP_BF16) {
        uint16_t c = (uint16_t)urange(s, 0x7F7F);
        double a = lowp_oracle_decode(f, c), b = lowp_oracle_decode(f, (uint16_t)(c + 1));
        return (float)(0.5 * (a + b));
    }
    const tie_list *t = &ties[f];
    return t->v[urange(s, (unsigned)t->n)];
}

/* ---------------------------------------------------------------------------------------
 * Global scales.
 * ------------------------------------------------------------------------------------- */

typedef struct {
    lowp_global_scale gs;
    float tensor_amax; /* the magnitude blocks are drawn around */
    char desc[64];
} gscale;

static const float special_amax[] = {
    0.0f, INFINITY, NAN,     FLT_MAX,  FLT_MIN,   0x1p-149f, 1.0f,
    6.0f, 448.0f,   2688.0f, 57344.0f, 0x1p-100f, 0x1p100f,  0x1.fffffep127f / 2688.0f};
static const float special_dec[] = {0.0f,      INFINITY,  NAN,      1.0f,        FLT_MAX, 0x1p-149f,
                                    0x1p-126f, 0x1p-127f, 0x1p127f, 0x1.8p-130f, 3.0e-39f};

static float random_magnitude(uint64_t *s, int lo, int hi)
{
    return (float)ldexp(1.0 + lowp_test_urand(s), lo + (int)urange(s, (unsigned)(hi - lo + 1)));
}

static float elem_max(lowp_block_format f)
{
    lowp_format ef = lowp_block_element_format(f);
    return (float)lowp_oracle_decode(ef, lowp_format_max_code(ef));
}

/* The global scale of a batch: mostly the recipe's own derivation from a tensor amax
 * (oracle), sometimes a decode scale as stored, sometimes an adversarial value. */
static gscale pick_gscale(const combo *c, uint64_t *s)
{
    gscale g;
    unsigned k = urange(s, 100);
    float amax;
    if (k < 55) {
        amax = random_magnitude(s, -60, 60);
        if (urange(s, 4) == 0)
            amax = random_magnitude(s, -149, 127);
        g.gs = lowp_oracle_recipe_global_scale(c->f, c->r, amax);
        snprintf(g.desc, sizeof g.desc, "amax 0x%08" PRIx32, lowp_f32_bits(amax));
        g.tensor_amax = amax;
    } else if (k < 70) {
        amax = special_amax[urange(s, sizeof special_amax / sizeof special_amax[0])];
        g.gs = lowp_oracle_recipe_global_scale(c->f, c->r, amax);
        snprintf(g.desc, sizeof g.desc, "amax 0x%08" PRIx32, lowp_f32_bits(amax));
        g.tensor_amax = isfinite(amax) && amax > 0 ? amax : random_magnitude(s, -20, 20);
    } else if (k < 90) {
        float dec = random_magnitude(s, -40, 20);
        if (urange(s, 4) == 0)
            dec = random_magnitude(s, -149, 127);
        g.gs = lowp_oracle_global_scale_from_dec(c->f, c->r, dec);
        snprintf(g.desc, sizeof g.desc, "dec 0x%08" PRIx32, lowp_f32_bits(dec));
        g.tensor_amax = dec * (c->f == LOWP_NVFP4 ? 2688.0f : elem_max(c->f));
        if (!isfinite(g.tensor_amax) || g.tensor_amax == 0.0f)
            g.tensor_amax = random_magnitude(s, -20, 20);
    } else {
        float dec = special_dec[urange(s, sizeof special_dec / sizeof special_dec[0])];
        g.gs = lowp_oracle_global_scale_from_dec(c->f, c->r, dec);
        snprintf(g.desc, sizeof g.desc, "dec 0x%08" PRIx32, lowp_f32_bits(dec));
        g.tensor_amax = random_magnitude(s, -30, 30);
    }
    return g;
}

/* ---------------------------------------------------------------------------------------
 * Block generators. Each writes bs elements.
 * ------------------------------------------------------------------------------------- */

enum { K_GAUSS, K_SPECIALS, K_BITS, K_TINY, K_TIES, K_SCALE_TIES, K_STRUCT, K_COUNT };
static const char *const kind_name[K_COUNT] = {"gaussian", "specials",   "bits",      "tiny",
                                               "ties",     "scale-ties", "structured"};

static float special_value(uint64_t *s)
{
    static const uint32_t sp[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
        0xFFFFFFFFu, 0x7FA5A5A5u, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x807FFFFFu, 0x00800000u,
        0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F7F7FFFu, 0xFF7F4000u}; /* just below the BF16 overflow */
    unsigned k = urange(s, sizeof sp / sizeof sp[0] + 2);
    if (k >= sizeof sp / sizeof sp[0]) /* a random binary32 subnormal */
        return lowp_f32_from_bits((uint32_t)(lowp_splitmix64(s) & 0x807FFFFFu) | 1u);
    return lowp_f32_from_bits(sp[k]);
}

static void gen_gauss(float *x, size_t bs, float mag, uint64_t *s)
{
    for (size_t i = 0; i < bs; i++)
        x[i] = (float)(lowp_test_gauss(s) * (double)mag / 3.0);
}

/* Magnitude of a block relative to the tensor amax A: mostly A / 2^(0..4), sometimes
 * far below. */
static float block_mag(float A, uint64_t *s)
{
    unsigned k = urange(s, 8);
    double m = (double)A * ldexp(1.0 + lowp_test_urand(s), -(int)urange(s, k == 0 ? 30 : 5));
    return (float)(m > FLT_MAX ? FLT_MAX : m);
}

/* Put some elements exactly on ties of the element format after scaling by the block's
 * own factor (from the oracle's trace), keeping |x| <= amax so the scale is unchanged. */
static void place_ties(const combo *c, const gscale *g, float *x, size_t bs, uint64_t *s)
{
    lowp_oracle_block_trace t;
    uint16_t codes[MAXB];
    if (lowp_oracle_block_quantize(c->f, c->r, g->gs, c->flags, x, codes, NULL, NULL, &t) != 0)
        return;
    lowp_format ef = lowp_block_element_format(c->f);
    size_t m_at = 0; /* keep the amax element */
    for (size_t i = 1; i < bs; i++)
        if (fabsf(x[i]) > fabsf(x[m_at]))
            m_at = i;
    size_t n = bs == 1 ? 1 : 1 + urange(s, (unsigned)bs / 2);
    for (size_t k = 0; k < n; k++) {
        size_t i = bs == 1 ? 0 : urange(s, (unsigned)bs);
        if (i == m_at && bs > 1)
            continue;
        float tv = random_tie(ef, s), v;
        if (urange(s, 2))
            tv = -tv;
        if (lowp_oracle_solve_scaled(t.factor, t.divides, tv, &v) != 0)
            continue;
        if (bs > 1 && !(fabsf(v) <= t.amax))
            continue;
        if (urange(s, 4) == 0) /* one binary32 ulp off the tie */
            v = nextafterf(v, urange(s, 2) ? INFINITY : -INFINITY);
        x[i] = v;
    }
}

/* A block whose amax puts the recipe's scale input on an E4M3 tie (NVFP4) or on a power
 * of two (MX), or one ulp below that amax. */
static void gen_scale_tie(const combo *c, const gscale *g, float *x, size_t bs, uint64_t *s)
{
    float target;
    if (c->f == LOWP_NVFP4)
        target = ties[LOWP_E4M3].v[urange(s, (unsigned)ties[LOWP_E4M3].n)];
    else
        target = ldexpf(1.0f, (int)urange(s, 250) - 126);
    float m;
    if (lowp_oracle_amax_for_scale_in(c->f, c->r, g->gs, c->flags, target, &m) < 0 ||
        !isfinite(m)) {
        gen_gauss(x, bs, g->tensor_amax, s);
        return;
    }
    if (urange(s, 3) == 0)
        m = nextafterf(m, 0.0f);
    gen_gauss(x, bs, m, s);
    for (size_t i = 0; i < bs; i++)
        if (!(fabsf(x[i]) <= m))
            x[i] = copysignf(m, x[i]);
    x[urange(s, (unsigned)bs)] = urange(s, 2) ? m : -m;
}

static void gen_struct(float *x, size_t bs, float mag, uint64_t *s)
{
    unsigned k = urange(s, 7);
    for (size_t i = 0; i < bs; i++) {
        switch (k) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] = urange(s, 2) ? 0.0f : -0.0f; break;
        case 2:
            x[i] = lowp_f32_from_bits(0x7FC00000u | (urange(s, 2) ? 0x80000000u : 0) |
                                           urange(s, 1000));
            break;
        case 3: x[i] = urange(s, 2) ? INFINITY : -INFINITY; break;
        case 4: x[i] = mag; break;
        case 5: x[i] = i == 0 ? -mag : 0.0f; break;
        default: x[i] = i % 2 ? mag : special_value(s); break;
        }
    }
}

static void gen_block(const combo *c, const gscale *g, int kind, float *x, size_t bs, uint64_t *s)
{
    float mag = block_mag(g->tensor_amax, s);
    switch (kind) {
    case K_GAUSS: gen_gauss(x, bs, mag, s); break;
    case K_SPECIALS:
        gen_gauss(x, bs, mag, s);
        for (unsigned k = 0, n = 1 + urange(s, 3); k < n; k++)
            x[urange(s, (unsigned)bs)] = special_value(s);
        break;
    case K_BITS:
        for (size_t i = 0; i < bs; i++)
            x[i] = lowp_f32_from_bits((uint32_t)lowp_splitmix64(s));
        break;
    case K_TINY:
        gen_gauss(x, bs, (float)((double)mag * ldexp(1.0, -8 - (int)urange(s, 40))), s);
        break;
    case K_TIES:
        gen_gauss(x, bs, mag, s);
        place_ties(c, g, x, bs, s);
        break;
    case K_SCALE_TIES: gen_scale_tie(c, g, x, bs, s); break;
    default: gen_struct(x, bs, mag, s); break;
    }
}

/* Kind of block number i of a batch: scale ties are costly (a bisection per block), so
 * they are rarer in the full tier. */
static int pick_kind(uint64_t *s, size_t bs)
{
    unsigned k = urange(s, 64);
    if (k < 20)
        return K_GAUSS;
    if (k < 30)
        return K_SPECIALS;
    if (k < 36)
        return K_BITS;
    if (k < 44)
        return K_TINY;
    if (k < 56)
        return K_TIES;
    if (k < 60)
        return K_STRUCT;
    if (bs > 1 && (!full || k == 60))
        return K_SCALE_TIES;
    return K_GAUSS;
}

/* ---------------------------------------------------------------------------------------
 * Comparing one batch.
 * ------------------------------------------------------------------------------------- */

static void print_block(const combo *c, const gscale *g, const char *kind, long batch, size_t blk,
                        const float *x, size_t bs, uint8_t want_q, const uint16_t *want,
                        uint8_t got_q, const uint16_t *got)
{
    char lab[48];
    combo_label(c, lab, sizeof lab);
    int d = code_digits(c->f);
    char wbuf[32 * 4 + 1], gbuf[32 * 4 + 1];
    for (size_t i = 0; i < bs; i++) {
        snprintf(wbuf + i * d, sizeof wbuf - i * d, "%0*x", d, want[i]);
        snprintf(gbuf + i * d, sizeof gbuf - i * d, "%0*x", d, got[i]);
    }
    flockfile(stdout);
    printf("%s [%s]: %s (dec 0x%08" PRIx32 " enc 0x%08" PRIx32 ") batch %ld block %zu: "
           "scale got 0x%02x expected 0x%02x, codes got %s expected %s; input",
           lab, kind, g->desc, lowp_f32_bits(g->gs.dec), lowp_f32_bits(g->gs.enc), batch,
           blk, got_q, want_q, gbuf, wbuf);
    for (size_t i = 0; i < bs; i++)
        printf(" %08" PRIx32, lowp_f32_bits(x[i]));
    putchar('\n');
    funlockfile(stdout);
}

static int counts_equal(const lowp_quant_counts *a, const lowp_quant_counts *b)
{
    return a->elements == b->elements && a->blocks == b->blocks && a->nan_in == b->nan_in &&
           a->inf_in == b->inf_in && a->saturated == b->saturated && a->flushed == b->flushed &&
           a->nan_out == b->nan_out && a->scale_zero == b->scale_zero &&
           a->scale_subnormal == b->scale_subnormal && a->scale_nan == b->scale_nan;
}

static void print_counts(const char *who, const lowp_quant_counts *k)
{
    printf("  %s: elements %zu blocks %zu nan_in %zu inf_in %zu saturated %zu flushed %zu "
           "nan_out %zu scale_zero %zu scale_subnormal %zu scale_nan %zu\n",
           who, k->elements, k->blocks, k->nan_in, k->inf_in, k->saturated, k->flushed, k->nan_out,
           k->scale_zero, k->scale_subnormal, k->scale_nan);
}

/* Quantize nblk blocks x with block.c (one call, as a tensor) and with the oracle (block by
 * block); compare codes, scales and counts. Returns the number of blocks compared. */
static long compare_batch(const combo *c, const gscale *g, const float *x, const int *kinds,
                          long nblk, long batch, tally *t)
{
    size_t bs = lowp_block_size(c->f), n = (size_t)nblk * bs;
    uint8_t *codes = malloc(lowp_block_code_bytes(c->f, n) + 1), *scales = malloc((size_t)nblk + 1);
    lowp_quant_counts kb = {0}, ko = {0};
    char why[256];
    int rc =
        lowp_block_quantize(c->f, c->r, g->gs, c->flags, x, n, codes, scales, &kb, why, sizeof why);
    ck_assert_msg(rc == 0, "lowp_block_quantize refused: %s", why);
    int has_scale = lowp_block_has_scales(c->f);
    long bad = 0;
    for (long b = 0; b < nblk; b++) {
        uint16_t want[MAXB], got[MAXB];
        uint8_t wq = 0;
        const float *xb = x + (size_t)b * bs;
        ck_assert(
            lowp_oracle_block_quantize(c->f, c->r, g->gs, c->flags, xb, want, &wq, &ko, NULL) == 0);
        uint8_t gq = has_scale ? scales[b] : 0;
        int diff = gq != wq;
        for (size_t i = 0; i < bs; i++) {
            got[i] = lowp_block_code_at(c->f, codes, (size_t)b * bs + i);
            diff |= got[i] != want[i];
        }
        if (diff) {
            bad++;
            if (tally_show(t))
                print_block(c, g, kind_name[kinds[b]], batch, (size_t)b, xb, bs, wq, want, gq, got);
        }
    }
    if (!counts_equal(&kb, &ko)) {
        bad++;
        if (tally_show(t)) {
            /* Find the first block whose counts differ. */
            for (long b = 0; b < nblk; b++) {
                lowp_quant_counts k1 = {0}, k2 = {0};
                uint8_t cb[64], sb[2];
                uint16_t w[MAXB];
                const float *xb = x + (size_t)b * bs;
                lowp_block_quantize(c->f, c->r, g->gs, c->flags, xb, bs, cb, sb, &k1, NULL, 0);
                lowp_oracle_block_quantize(c->f, c->r, g->gs, c->flags, xb, w, sb, &k2, NULL);
                if (!counts_equal(&k1, &k2)) {
                    char lab[48];
                    combo_label(c, lab, sizeof lab);
                    flockfile(stdout);
                    printf("%s [%s]: %s (dec 0x%08" PRIx32 " enc 0x%08" PRIx32 ") batch %ld "
                           "block %ld: counts differ; input",
                           lab, kind_name[kinds[b]], g->desc, lowp_f32_bits(g->gs.dec),
                           lowp_f32_bits(g->gs.enc), batch, b);
                    for (size_t i = 0; i < bs; i++)
                        printf(" %08" PRIx32, lowp_f32_bits(xb[i]));
                    putchar('\n');
                    print_counts("lowp_block_quantize", &k1);
                    print_counts("oracle", &k2);
                    funlockfile(stdout);
                    break;
                }
            }
        }
    }
    free(codes);
    free(scales);
#pragma omp atomic
    t->n += (unsigned long long)nblk;
    return bad;
}

/* One case set: nblocks random blocks in batches, OpenMP-parallel over batches. */
static void run_case_set(const combo *c, int ci, long nblocks)
{
    tally t = {{0}, 0, 0};
    combo_label(c, t.label, sizeof t.label);
    size_t bs = lowp_block_size(c->f);
    long per_batch = bs == 1 ? BATCH_ELEMS_1 : BATCH_BLOCKS;
    long nbatch = (nblocks + per_batch - 1) / per_batch;
    int progress = full && progress_wanted();
    long done = 0;
    double t0 = (double)clock();
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
#pragma omp parallel
    {
        float *x = malloc((size_t)per_batch * bs * sizeof *x);
        int *kinds = malloc((size_t)per_batch * sizeof *kinds);
#pragma omp for schedule(dynamic, 1)
        for (long b = 0; b < nbatch; b++) {
            uint64_t s = lowp_test_stream(seed, (uint64_t)ci + 1, (uint64_t)b, 0x6f626c6b);
            long nb = b == nbatch - 1 ? nblocks - b * per_batch : per_batch;
            gscale g = pick_gscale(c, &s);
            for (long k = 0; k < nb; k++) {
                kinds[k] = pick_kind(&s, bs);
                gen_block(c, &g, kinds[k], x + (size_t)k * bs, bs, &s);
            }
            compare_batch(c, &g, x, kinds, nb, b, &t);
            if (progress) {
                long d;
#pragma omp atomic capture
                d = done += nb;
                if ((b & 63) == 0)
                    fprintf(stderr, "\roracle_block: %-24s %ld / %ld blocks", t.label, d, nblocks);
            }
        }
        free(x);
        free(kinds);
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    double wall = (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec);
    if (progress)
        fprintf(stderr, "\r%78s\r", "");
    printf("%s: %ld blocks, %llu mismatches, %.1f s (%.0f blocks/s, cpu %.1f s)\n", t.label,
           nblocks, t.bad, wall, (double)nblocks / (wall > 0 ? wall : 1),
           ((double)clock() - t0) / CLOCKS_PER_SEC);
    fflush(stdout);
    tally_end(&t);
}

/* ---------------------------------------------------------------------------------------
 * Tests: tables and arithmetic.
 * ------------------------------------------------------------------------------------- */

START_TEST(oracle_tables_match_block_h)
{
    tally t = {"tables", 0, 0};
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++) {
        t.n++;
        if (lowp_oracle_block_size((lowp_block_format)f) != lowp_block_size((lowp_block_format)f) &&
            tally_show(&t))
            printf("tables: %s block size: oracle %zu, block.h %zu\n",
                   lowp_block_format_name((lowp_block_format)f),
                   lowp_oracle_block_size((lowp_block_format)f),
                   lowp_block_size((lowp_block_format)f));
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            int a = lowp_oracle_recipe_defined((lowp_block_format)f, (lowp_recipe)r);
            int b = lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) == 0;
            t.n++;
            if (a != b && tally_show(&t))
                printf("tables: %s %s: recipes.md %s it, lowp_recipe_check %s it\n",
                       lowp_block_format_name((lowp_block_format)f),
                       lowp_recipe_name((lowp_recipe)r), a ? "defines" : "does not define",
                       b ? "accepts" : "refuses");
        }
    }
    tally_end(&t);
    ck_assert_msg(t.bad == 0, "oracle tables differ from block.h");
}
END_TEST

/* The oracle's MPFR binary32 multiply and divide against the machine's (x86-64 SSE is
 * IEEE binary32 with round-to-nearest-even and subnormals): a check of the oracle itself. */
START_TEST(oracle_arithmetic_is_binary32)
{
    tally t = {"oracle arithmetic", 0, 0};
    uint64_t s = lowp_test_stream(seed, 99, 0, 0);
    long n = full ? 4000000 : 200000;
    for (long i = 0; i < n; i++) {
        float a, b;
        unsigned k = urange(&s, 4);
        if (k == 0) {
            a = lowp_f32_from_bits((uint32_t)lowp_splitmix64(&s));
            b = lowp_f32_from_bits((uint32_t)lowp_splitmix64(&s));
        } else { /* near the subnormal and overflow ends */
            a = random_magnitude(&s, -149, 127);
            b = k == 1 ? random_magnitude(&s, -40, 40)
                       : (float)ldexp(1.0 + lowp_test_urand(&s), k == 2 ? -100 : 100);
            if (urange(&s, 2))
                a = -a;
        }
        volatile float va = a, vb = b;
        float pm = va * vb, pd = va / vb;
        float om = lowp_oracle_f32_mul(a, b), od = lowp_oracle_f32_div(a, b);
        t.n += 2;
        if (!same_scale_value(pm, om) && tally_show(&t))
            printf("oracle arithmetic: 0x%08" PRIx32 " * 0x%08" PRIx32 ": oracle 0x%08" PRIx32
                   " machine 0x%08" PRIx32 "\n",
                   lowp_f32_bits(a), lowp_f32_bits(b), lowp_f32_bits(om),
                   lowp_f32_bits(pm));
        if (!same_scale_value(pd, od) && tally_show(&t))
            printf("oracle arithmetic: 0x%08" PRIx32 " / 0x%08" PRIx32 ": oracle 0x%08" PRIx32
                   " machine 0x%08" PRIx32 "\n",
                   lowp_f32_bits(a), lowp_f32_bits(b), lowp_f32_bits(od),
                   lowp_f32_bits(pd));
    }
    /* Exact halfway underflow rounds to even (zero), and overflow gives Inf. */
    t.n += 3;
    if (lowp_f32_bits(lowp_oracle_f32_mul(0x1p-75f, 0x1p-75f)) != 0 && tally_show(&t))
        printf("oracle arithmetic: 2^-150 does not round to +0\n");
    if (lowp_f32_bits(lowp_oracle_f32_mul(0x1.8p-75f, 0x1p-75f)) != 1 && tally_show(&t))
        printf("oracle arithmetic: 1.5*2^-150 does not round to 2^-149\n");
    if (!isinf(lowp_oracle_f32_mul(0x1p64f, 0x1p64f)) && tally_show(&t))
        printf("oracle arithmetic: 2^128 does not overflow to Inf\n");
    tally_end(&t);
    ck_assert_msg(t.bad == 0, "the oracle's binary32 arithmetic is wrong");
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Tests: global scales.
 * ------------------------------------------------------------------------------------- */

/* The fields recipes.md defines: NVFP4 trtllm/exact both (S and g), modelopt / sglang-kv /
 * FP8 the decode scale g, MX and BF16 {1, 1} from an amax and nothing from a decode scale. */
static void compare_gs(tally *t, const combo *c, const char *what, float in, lowp_global_scale want,
                       lowp_global_scale got, int from_dec)
{
    int use_enc = c->f == LOWP_NVFP4 && (c->r == LOWP_RECIPE_TRTLLM || c->r == LOWP_RECIPE_EXACT);
    int has_global = lowp_block_has_global_scale(c->f);
    int ok;
    if (!has_global)
        ok = from_dec || (same_scale_value(got.dec, 1.0f) && same_scale_value(got.enc, 1.0f));
    else
        ok = same_scale_value(got.dec, want.dec) &&
             (!use_enc || same_scale_value(got.enc, want.enc));
    t->n++;
    if (!ok && tally_show(t)) {
        char lab[48];
        combo_label(c, lab, sizeof lab);
        printf("%s %s 0x%08" PRIx32 " (%.9g): got dec 0x%08" PRIx32 " enc 0x%08" PRIx32
               " expected dec 0x%08" PRIx32 " enc 0x%08" PRIx32 "%s\n",
               lab, what, lowp_f32_bits(in), (double)in, lowp_f32_bits(got.dec),
               lowp_f32_bits(got.enc), lowp_f32_bits(want.dec),
               lowp_f32_bits(want.enc), use_enc ? "" : " (enc not used by the recipe)");
    }
}

START_TEST(global_scale_derivations)
{
    tally t = {"global scales", 0, 0};
    float *v = NULL;
    size_t n = lowp_cases_f32(LOWP_E4M3, seed, 4, full ? 200000 : 20000, &v);
    ck_assert(n > 0);
    for (int k = 0; k < n_combos; k++) {
        const combo *c = &combos[k];
        if (c->flags)
            continue;
        for (size_t i = 0; i < n; i++) {
            float a = v[i];
            if (signbit(a) && !isnan(a))
                continue; /* an amax is |x|: negative values are outside recipes.md */
            compare_gs(&t, c, "amax", a, lowp_oracle_recipe_global_scale(c->f, c->r, a),
                       lowp_recipe_global_scale(c->f, c->r, a), 0);
            compare_gs(&t, c, "dec", a, lowp_oracle_global_scale_from_dec(c->f, c->r, a),
                       lowp_global_scale_from_dec(c->f, c->r, a), 1);
        }
    }
    free(v);
    tally_end(&t);
    ck_assert_msg(t.bad == 0, "%llu global scales differ", t.bad);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Tests: random blocks.
 * ------------------------------------------------------------------------------------- */

START_TEST(random_blocks)
{
    int k = _i; /* loop test: one combination */
    const combo *c = &combos[k];
    long nb = full ? (c->flags ? FULL_BLOCKS_UP : FULL_BLOCKS) : QUICK_BLOCKS;
    unsigned long long bad0 = total_bad;
    run_case_set(c, k, nb);
    char lab[48];
    combo_label(c, lab, sizeof lab);
    ck_assert_msg(total_bad == bad0, "%s: %llu mismatches", lab, total_bad - bad0);
}
END_TEST

/* Every special global scale (from a special tensor amax, and as a special decode scale)
 * times a fixed set of special blocks, for every combination: deterministic coverage of
 * the corners the random draw reaches only sometimes (S = 0 with an Inf element, NaN
 * scales, zero scales, FLT_MAX elements). */
#define GRID_BLOCKS 12
static void grid_block(int k, float *x, size_t bs, uint64_t *s)
{
    for (size_t i = 0; i < bs; i++)
        x[i] = (float)(lowp_test_gauss(s) * (k < 6 ? ldexp(1.0, 8 * k - 20) : 1.0));
    switch (k) {
    case 6:
        for (size_t i = 0; i < bs; i++)
            x[i] = 0.0f;
        break;
    case 7: x[0] = INFINITY; break;
    case 8:
        x[bs - 1] = -INFINITY;
        x[0] = NAN;
        break;
    case 9:
        for (size_t i = 0; i < bs; i++)
            x[i] = lowp_f32_from_bits(0xFFC00000u);
        break;
    case 10:
        for (size_t i = 0; i < bs; i++)
            x[i] = lowp_f32_from_bits((uint32_t)(lowp_splitmix64(s) & 0x807FFFFFu));
        break;
    case 11:
        x[0] = FLT_MAX;
        x[bs - 1] = -0x1.fefffep127f;
        break;
    default: break;
    }
}

START_TEST(special_scale_grid)
{
    int k = _i;
    const combo *c = &combos[k];
    tally t = {{0}, 0, 0};
    combo_label(c, t.label, sizeof t.label);
    strncat(t.label, " [grid]", sizeof t.label - strlen(t.label) - 1);
    size_t bs = lowp_block_size(c->f);
    size_t na = sizeof special_amax / sizeof special_amax[0],
           nd = sizeof special_dec / sizeof special_dec[0];
    float x[GRID_BLOCKS * MAXB];
    int kinds[GRID_BLOCKS];
    for (size_t j = 0; j < na + nd; j++) {
        gscale g;
        float v = j < na ? special_amax[j] : special_dec[j - na];
        g.gs = j < na ? lowp_oracle_recipe_global_scale(c->f, c->r, v)
                      : lowp_oracle_global_scale_from_dec(c->f, c->r, v);
        snprintf(g.desc, sizeof g.desc, "%s 0x%08" PRIx32, j < na ? "amax" : "dec",
                 lowp_f32_bits(v));
        g.tensor_amax = 1.0f;
        uint64_t s = lowp_test_stream(seed, 1000 + (uint64_t)k, j, 0);
        for (int b = 0; b < GRID_BLOCKS; b++) {
            grid_block(b, x + (size_t)b * bs, bs, &s);
            kinds[b] = K_STRUCT;
        }
        compare_batch(c, &g, x, kinds, GRID_BLOCKS, (long)j, &t);
    }
    unsigned long long bad = t.bad;
    tally_end(&t);
    ck_assert_msg(bad == 0, "%s: %llu mismatches", t.label, bad);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Tests: the golden vectors in vectors/block (one test object per line, as
 * `lowp vectors gen-block` writes them; vectors/README.md).
 * ------------------------------------------------------------------------------------- */

static char vectors_dir[4096];

/* The hex strings of array "key": ["..", ".."] in [p, end); returns the count. */
static int json_hex_array(const char *p, const char *end, const char *key, uint32_t *out, int cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": [", key);
    const char *q = strstr(p, pat);
    if (q == NULL || q >= end)
        return -1;
    q += strlen(pat);
    int n = 0;
    while (*q && *q != ']' && n < cap) {
        if (*q == '"') {
            out[n++] = (uint32_t)strtoul(q + 1, NULL, 16);
            q = strchr(q + 1, '"');
            if (q == NULL)
                return -1;
        }
        q++;
    }
    return n;
}

START_TEST(golden_vectors)
{
    tally t = {"vectors/block", 0, 0};
    DIR *d = opendir(vectors_dir);
    ck_assert_msg(d != NULL, "cannot read %s (set LOWP_VECTORS_DIR)", vectors_dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", vectors_dir, e->d_name);
        char *text = lowp_test_read_file(path, NULL);
        ck_assert_msg(text != NULL, "cannot read %s", path);
        files++;
        char fs[32], rs[32];
        ck_assert_msg(lowp_test_json_string(text, NULL, "format", fs, sizeof fs) &&
                          lowp_test_json_string(text, NULL, "recipe", rs, sizeof rs),
                      "%s: no format / recipe", path);
        combo c = {0, 0, 0};
        ck_assert(lowp_block_format_parse(fs, &c.f) == 0 && lowp_recipe_parse(rs, &c.r) == 0);
        size_t bs = lowp_block_size(c.f);
        lowp_global_scale gs = {1.0f, 1.0f};
        for (char *line = text; line && *line;
             line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
            char *eol = strchr(line, '\n');
            const char *end = eol ? eol : line + strlen(line);
            char hx[64];
            /* A group's line carries its global scale and flags (absent: 1.0, none). */
            const char *grp = strstr(line, "\"type\": \"BlockQuantizeTest\"");
            if (grp != NULL && grp < end) {
                gs.dec = gs.enc = 1.0f;
                c.flags = 0;
                if (lowp_test_json_string(line, end, "globalScaleDec", hx, sizeof hx))
                    gs.dec = lowp_f32_from_bits((uint32_t)strtoul(hx, NULL, 16));
                if (lowp_test_json_string(line, end, "globalScaleEnc", hx, sizeof hx))
                    gs.enc = lowp_f32_from_bits((uint32_t)strtoul(hx, NULL, 16));
                const char *up = strstr(line, "\"scaleUp\": true");
                if (up != NULL && up < end)
                    c.flags = LOWP_BLOCK_SCALE_UP;
            }
            const char *tc = strstr(line, "{\"tcId\": ");
            if (tc == NULL || tc >= end)
                continue;
            long id = strtol(tc + 9, NULL, 10);
            uint32_t in[256], want[256], wq[8];
            int n = json_hex_array(line, end, "input", in, 256);
            int nc = json_hex_array(line, end, "codes", want, 256);
            int ns = json_hex_array(line, end, "scales", wq, 8);
            ck_assert_msg(n > 0 && nc == n && (size_t)n % bs == 0, "%s tcId %ld: malformed", path,
                          id);
            float x[256];
            for (int i = 0; i < n; i++)
                x[i] = lowp_f32_from_bits(in[i]);
            uint8_t codes[512], scales[16];
            char why[256];
            ck_assert_msg(lowp_block_quantize(c.f, c.r, gs, c.flags, x, (size_t)n, codes, scales,
                                              NULL, why, sizeof why) == 0,
                          "%s: %s", path, why);
            for (int b = 0; b * (int)bs < n; b++) {
                uint16_t o[MAXB];
                uint8_t oq = 0;
                ck_assert(lowp_oracle_block_quantize(c.f, c.r, gs, c.flags, x + b * bs, o, &oq,
                                                     NULL, NULL) == 0);
                int diff = 0;
                if (lowp_block_has_scales(c.f))
                    diff |= ns <= b || wq[b] != oq || scales[b] != oq;
                for (size_t i = 0; i < bs; i++) {
                    size_t j = (size_t)b * bs + i;
                    diff |= want[j] != o[i] || lowp_block_code_at(c.f, codes, j) != o[i];
                }
                t.n++;
                if (diff && tally_show(&t))
                    printf("%s tcId %ld block %d: the file, the oracle and lowp_block_quantize "
                           "disagree (scale file 0x%02x oracle 0x%02x lowp 0x%02x)\n",
                           e->d_name, id, b, ns > b ? wq[b] : 0xFFFu, oq,
                           lowp_block_has_scales(c.f) ? scales[b] : 0);
            }
        }
        free(text);
    }
    closedir(d);
    printf("vectors/block: %d files, %llu blocks, %llu mismatches\n", files, t.n, t.bad);
    tally_end(&t);
    ck_assert_msg(files > 0, "no vector files in %s", vectors_dir);
    ck_assert_msg(t.bad == 0, "%llu vector blocks differ", t.bad);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * Tests: the NVFP4 trtllm/exact disagreement set.
 * ------------------------------------------------------------------------------------- */

/* The test's own third model of the steps: native binary32 arithmetic (C float on x86-64:
 * IEEE round-to-nearest-even, subnormals, no contraction in these expressions) with the
 * fast codecs, which test_oracle_mpfr checks against MPFR on every input. */
static lowp_codec cv_e4m3, cv_e2m1;

static uint8_t nat_q(int exact, float S, float m)
{
    if (exact)
        return (uint8_t)lowp_encode_f32(&cv_e4m3, m != 0.0f ? m * (S * (1.0f / 6.0f)) : 0.0f);
    return (uint8_t)lowp_encode_f32(&cv_e4m3, S * (m * lowp_rcp_approx_ftz(6.0f)));
}

static float nat_o(int exact, float S, uint8_t q)
{
    float v = lowp_decode_f32(LOWP_E4M3, q);
    if (exact)
        return fminf(1.0f / (v * (1.0f / S)), FLT_MAX);
    return lowp_rcp_approx_ftz(v * lowp_rcp_approx_ftz(S));
}

/* Is bit pattern u in one of the runs (sorted, disjoint)? Returns the run or NULL. */
static const lowp_oracle_f32_run *in_runs(const lowp_oracle_f32_run *r, size_t n, uint32_t u)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = lo + (hi - lo) / 2;
        if (r[m].hi < u)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < n && r[lo].lo <= u && u <= r[lo].hi ? &r[lo] : NULL;
}

static uint32_t clamp_bits(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= FLT_MAX)
        return 0x7F7FFFFFu;
    return lowp_f32_bits((float)v);
}

/* Brute force over [lo, hi] of the amax set; returns mismatches. */
static long brute_amax(const lowp_oracle_nvfp4_diff *d, tally *t, uint64_t *scanned)
{
    float S = d->S;
    uint32_t lo = clamp_bits(6.0 * 0x1p-12 / S), hi = clamp_bits(6.0 * 900.0 / S);
    long bad = 0;
    /* Outside [lo, hi] both recipes give 0 below and 0x7E above (monotone), so the set
     * lies inside. */
    const float flo = lowp_f32_from_bits(lo), fhi = lowp_f32_from_bits(hi);
    if (nat_q(0, S, flo) != 0 || nat_q(1, S, flo) != 0 || nat_q(0, S, fhi) != 0x7E ||
        nat_q(1, S, fhi) != 0x7E) {
        if (tally_show(t))
            printf("disagreement S=0x%08" PRIx32 ": brute-force amax range [0x%08" PRIx32
                   ", 0x%08" PRIx32 "] does not reach codes 0 and 0x7e\n",
                   lowp_f32_bits(S), lo, hi);
        bad++;
    }
    for (size_t i = 0; i < d->n_amax_runs; i++)
        if (d->amax_runs[i].lo < lo || d->amax_runs[i].hi > hi) {
            bad++;
            if (tally_show(t))
                printf("disagreement S=0x%08" PRIx32 ": amax run outside the scan range\n",
                       lowp_f32_bits(S));
        }
    uint64_t count = 0;
#pragma omp parallel for schedule(static) reduction(+ : count, bad)
    for (long long u = lo; u <= (long long)hi; u++) {
        float m = lowp_f32_from_bits((uint32_t)u);
        uint8_t a = nat_q(0, S, m), b = nat_q(1, S, m);
        const lowp_oracle_f32_run *r = in_runs(d->amax_runs, d->n_amax_runs, (uint32_t)u);
        int ok = (a != b) ? (r != NULL && r->a == a && r->b == b) : (r == NULL);
        count += a != b;
        if (!ok) {
            bad++;
            if (tally_show(t))
                printf("disagreement S=0x%08" PRIx32 ": amax 0x%08" PRIx32 " scale codes "
                       "trtllm 0x%02x exact 0x%02x, enumeration says %s\n",
                       lowp_f32_bits(S), (uint32_t)u, a, b, r ? "differ" : "equal");
        }
    }
    if (count != d->amax_count) {
        bad++;
        if (tally_show(t))
            printf("disagreement S=0x%08" PRIx32 ": brute force counts %" PRIu64
                   " amax values, enumeration %" PRIu64 "\n",
                   lowp_f32_bits(S), count, d->amax_count);
    }
    *scanned += hi - lo + 1;
    return bad;
}

/* Brute force of one q's element set over the x range where either code can change, both
 * signs when full (else x >= 0 and the mirror of every run end). */
static long brute_q(const lowp_oracle_nvfp4_diff *d, const lowp_oracle_nvfp4_q_diff *qd, tally *t,
                    uint64_t *scanned)
{
    float S = d->S;
    float ot = nat_o(0, S, qd->q), oe = nat_o(1, S, qd->q);
    long bad = 0;
    if (lowp_f32_bits(ot) != lowp_f32_bits(qd->o_trtllm) ||
        lowp_f32_bits(oe) != lowp_f32_bits(qd->o_exact)) {
        if (tally_show(t))
            printf("disagreement S=0x%08" PRIx32 " q 0x%02x: factors native 0x%08" PRIx32
                   "/0x%08" PRIx32 ", oracle 0x%08" PRIx32 "/0x%08" PRIx32 "\n",
                   lowp_f32_bits(S), qd->q, lowp_f32_bits(ot), lowp_f32_bits(oe),
                   lowp_f32_bits(qd->o_trtllm), lowp_f32_bits(qd->o_exact));
        return 1;
    }
    /* For finite positive o the code is 0 below 0.25 / o and 7 from 5 / o up, so the
     * scan [0.2 / omax, 6 / omin] holds every x whose codes can differ. An o = Inf gives 7
     * for every x (0 * Inf is NaN, coded 7): scan from 0. An o of 0 or NaN is not met
     * for the S tested; such a q is reported and skipped. */
    double omax = fmax(ot, oe), omin = fmin(ot, oe);
    if (!(omin > 0) || isnan(ot) || isnan(oe) || isinf(omin)) {
        printf("disagreement S=0x%08" PRIx32 " q 0x%02x: factors 0x%08" PRIx32 "/0x%08" PRIx32
               " not brute-forced\n",
               lowp_f32_bits(S), qd->q, lowp_f32_bits(ot), lowp_f32_bits(oe));
        return 0;
    }
    uint32_t lo = isinf(omax) ? 0 : clamp_bits(0.2 / omax), hi = clamp_bits(6.0 / omin);
    if (lowp_encode_f32(&cv_e2m1, lowp_f32_from_bits(hi) * ot) != 7 ||
        lowp_encode_f32(&cv_e2m1, lowp_f32_from_bits(hi) * oe) != 7 ||
        (lo > 0 && (lowp_encode_f32(&cv_e2m1, lowp_f32_from_bits(lo) * ot) != 0 ||
                    lowp_encode_f32(&cv_e2m1, lowp_f32_from_bits(lo) * oe) != 0))) {
        if (tally_show(t))
            printf("disagreement S=0x%08" PRIx32 " q 0x%02x: scan ends are not codes 0 and 7\n",
                   lowp_f32_bits(S), qd->q);
        return 1;
    }
    for (size_t i = 0; i < qd->n_runs; i++)
        if (qd->runs[i].lo < lo || qd->runs[i].hi > hi) {
            bad++;
            if (tally_show(t))
                printf("disagreement S=0x%08" PRIx32 " q 0x%02x: run [0x%08" PRIx32 ", 0x%08" PRIx32
                       "] outside the scan\n",
                       lowp_f32_bits(S), qd->q, qd->runs[i].lo, qd->runs[i].hi);
        }
    uint64_t count = 0;
    int signs = full ? 2 : 1;
    for (int sg = 0; sg < signs; sg++) {
        uint32_t sb = sg ? 0x80000000u : 0;
#pragma omp parallel for schedule(static) reduction(+ : count, bad)
        for (long long u = lo; u <= (long long)hi; u++) {
            float x = lowp_f32_from_bits((uint32_t)u | sb);
            unsigned a = lowp_encode_f32(&cv_e2m1, x * ot), b = lowp_encode_f32(&cv_e2m1, x * oe);
            const lowp_oracle_f32_run *r = in_runs(qd->runs, qd->n_runs, (uint32_t)u);
            int differ = a != b;
            int ok = differ ? r != NULL : r == NULL;
            if (ok && differ && !sg)
                ok = r->a == a && r->b == b;
            count += (uint64_t)differ;
            if (!ok) {
                bad++;
                if (tally_show(t))
                    printf("disagreement S=0x%08" PRIx32 " q 0x%02x: x 0x%08" PRIx32
                           " codes trtllm 0x%x exact 0x%x, enumeration says %s\n",
                           lowp_f32_bits(S), qd->q, (uint32_t)u | sb, a, b,
                           r ? "differ" : "equal");
            }
        }
    }
    if (!full) /* the mirror of every run end and its outer neighbour */
        for (size_t i = 0; i < qd->n_runs; i++) {
            uint32_t ends[4] = {qd->runs[i].lo, qd->runs[i].hi, qd->runs[i].lo - 1,
                                qd->runs[i].hi + 1};
            for (int k = 0; k < 4; k++) {
                if (ends[k] > 0x7F800000u || (k == 2 && qd->runs[i].lo == 0))
                    continue;
                float x = lowp_f32_from_bits(ends[k] | 0x80000000u);
                int differ = lowp_encode_f32(&cv_e2m1, x * ot) != lowp_encode_f32(&cv_e2m1, x * oe);
                if (differ != (k < 2) && !(k >= 2 && in_runs(qd->runs, qd->n_runs, ends[k]))) {
                    bad++;
                    if (tally_show(t))
                        printf("disagreement S=0x%08" PRIx32 " q 0x%02x: -x 0x%08" PRIx32
                               " breaks the sign symmetry\n",
                               lowp_f32_bits(S), qd->q, ends[k]);
                }
            }
        }
    uint64_t want = qd->x_count / (uint64_t)(3 - signs);
    if (count != want) {
        bad++;
        if (tally_show(t))
            printf("disagreement S=0x%08" PRIx32 " q 0x%02x: brute force counts %" PRIu64
                   " elements, enumeration %" PRIu64 "\n",
                   lowp_f32_bits(S), qd->q, count, want);
    }
    *scanned += (uint64_t)signs * (hi - lo + 1);
    return bad;
}

static float common_amax_top(float S, uint8_t q);

/* Blocks made from the sets, through lowp_block_quantize: an amax from every amax run (its
 * ends) gives the run's two scale codes; for every q, an amax with q under both recipes
 * and elements at run ends give the run's element codes. */
static long block_c_on_set(const lowp_oracle_nvfp4_diff *d, tally *t, long *checked)
{
    lowp_global_scale gs = {1.0f / d->S, d->S};
    long bad = 0;
    for (size_t i = 0; i < d->n_amax_runs; i++)
        for (int k = 0; k < 2; k++) {
            float x[16] = {0};
            x[0] = lowp_f32_from_bits(k ? d->amax_runs[i].hi : d->amax_runs[i].lo);
            uint8_t c1[8], c2[8], q1, q2;
            lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs, 0, x, 16, c1, &q1, NULL, NULL,
                                0);
            lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, x, 16, c2, &q2, NULL, NULL,
                                0);
            (*checked)++;
            if (q1 == d->amax_runs[i].a && q2 == d->amax_runs[i].b)
                continue;
            bad++;
            if (tally_show(t)) {
                printf("disagreement S=0x%08" PRIx32 ": block.c on amax 0x%08" PRIx32
                       " gives scales 0x%02x/0x%02x, the set says 0x%02x/0x%02x\n",
                       lowp_f32_bits(d->S), lowp_f32_bits(x[0]), q1, q2,
                       d->amax_runs[i].a, d->amax_runs[i].b);
            }
        }
    for (size_t j = 0; j < d->n_q; j++) {
        const lowp_oracle_nvfp4_q_diff *qd = &d->q[j];
        float m = common_amax_top(d->S, qd->q);
        if (m == 0.0f)
            continue; /* q is not a common code of any amax */
        for (size_t i = 0; i < qd->n_runs; i++)
            for (int k = 0; k < 2; k++) {
                float xv = lowp_f32_from_bits(k ? qd->runs[i].hi : qd->runs[i].lo);
                if (!(xv <= m))
                    continue;
                float x[16] = {0};
                x[0] = m;
                x[1] = xv;
                x[2] = -xv;
                uint8_t c1[8], c2[8], q1, q2;
                lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_TRTLLM, gs, 0, x, 16, c1, &q1, NULL,
                                    NULL, 0);
                lowp_block_quantize(LOWP_NVFP4, LOWP_RECIPE_EXACT, gs, 0, x, 16, c2, &q2, NULL,
                                    NULL, 0);
                unsigned a = lowp_block_code_at(LOWP_NVFP4, c1, 1),
                         b = lowp_block_code_at(LOWP_NVFP4, c2, 1);
                unsigned na = lowp_block_code_at(LOWP_NVFP4, c1, 2),
                         nb = lowp_block_code_at(LOWP_NVFP4, c2, 2);
                (*checked)++;
                if (q1 == qd->q && q2 == qd->q && a == qd->runs[i].a && b == qd->runs[i].b &&
                    na != nb)
                    continue;
                bad++;
                if (tally_show(t)) {
                    printf("disagreement S=0x%08" PRIx32 " q 0x%02x: block.c on amax 0x%08" PRIx32
                           " x 0x%08" PRIx32 " gives 0x%02x/0x%02x codes 0x%x/0x%x (-x 0x%x/0x%x), "
                           "the set says 0x%x/0x%x\n",
                           lowp_f32_bits(d->S), qd->q, lowp_f32_bits(m),
                           lowp_f32_bits(xv), q1, q2, a, b, na, nb, qd->runs[i].a,
                           qd->runs[i].b);
                }
            }
    }
    return bad;
}

/* The ref/notes/formats.md section 5.8 vectors: global amax, block amax, element, codes. */
static const uint32_t s58[3][5] = {
    {0x43d48c1eu, 0x43b195d8u, 0x4172e948u, 0x1, 0x0},
    {0x441cf392u, 0x44152797u, 0x41c25222u, 0x1, 0x0},
    {0x441061a7u, 0x437683cdu, 0x41f782d5u, 0x1, 0x2},
};

/* The largest amax whose scale code is q under both recipes (native steps), or 0 if none
 * has. Exact: each recipe maps an interval of m to q, so both do on the intersection, whose
 * top is the last m before either code exceeds q. An element of the set fits in a block
 * with scale q under both iff it is at most that amax. */
static float common_amax_top(float S, uint8_t q)
{
    uint32_t lo = 0, hi = 0x7F800000u;
    while (lo < hi) { /* first m with either code > q (both are monotone) */
        uint32_t mid = lo + (hi - lo) / 2;
        const float fm = lowp_f32_from_bits(mid);
        if (nat_q(0, S, fm) > q || nat_q(1, S, fm) > q)
            hi = mid;
        else
            lo = mid + 1;
    }
    float m = lo > 0 ? lowp_f32_from_bits(lo - 1) : 0.0f;
    return (m > 0.0f && nat_q(0, S, m) == q && nat_q(1, S, m) == q) ? m : 0.0f;
}

static void report_set(const lowp_oracle_nvfp4_diff *d, const char *why)
{
    /* Split the element count: q = 0 (codes differ but both decode to 0, the scale being
     * 0), q > 0, and of those the elements that fit in a block with scale q under both
     * recipes (|x| <= the largest such amax). */
    uint64_t x0 = 0, xpos = 0, xreal = 0;
    for (size_t j = 0; j < d->n_q; j++) {
        const lowp_oracle_nvfp4_q_diff *qd = &d->q[j];
        if (qd->q == 0) {
            x0 += qd->x_count;
            continue;
        }
        xpos += qd->x_count;
        float top = common_amax_top(d->S, qd->q);
        for (size_t i = 0; i < qd->n_runs && top > 0.0f; i++) {
            uint32_t hi =
                qd->runs[i].hi < lowp_f32_bits(top) ? qd->runs[i].hi : lowp_f32_bits(top);
            if (qd->runs[i].lo <= hi)
                xreal += 2 * ((uint64_t)(hi - qd->runs[i].lo) + 1);
        }
    }
    printf("disagreement S=0x%08" PRIx32 " (%.9g)%s: (a) %zu amax runs, %" PRIu64
           " amax values with different scale codes; (b) %zu of 127 scale codes with different "
           "element factors; (c) %" PRIu64 " binary32 elements with different codes: %" PRIu64
           " under scale 0 (both decode to 0), %" PRIu64 " under a nonzero scale, %" PRIu64
           " of them within the amax range of their scale\n",
           lowp_f32_bits(d->S), (double)d->S, why, d->n_amax_runs, d->amax_count, d->n_q,
           d->x_count, x0, xpos, xreal);
    for (size_t j = 0; j < d->n_q && j < (full ? d->n_q : 6); j++) {
        const lowp_oracle_nvfp4_q_diff *qd = &d->q[j];
        printf("  q 0x%02x (%g): o trtllm 0x%08" PRIx32 " exact 0x%08" PRIx32 ", %zu runs, %" PRIu64
               " elements",
               qd->q, lowp_decode_f64(LOWP_E4M3, qd->q), lowp_f32_bits(qd->o_trtllm),
               lowp_f32_bits(qd->o_exact), qd->n_runs, qd->x_count);
        for (size_t i = 0; i < qd->n_runs && i < 3; i++)
            printf("%s [0x%08" PRIx32 ", 0x%08" PRIx32 "] %x/%x", i ? "," : ":", qd->runs[i].lo,
                   qd->runs[i].hi, qd->runs[i].a, qd->runs[i].b);
        printf("%s\n", qd->n_runs > 3 ? ", ..." : "");
    }
    if (!full && d->n_q > 6)
        printf("  (%zu more scale codes; --full lists all)\n", d->n_q - 6);
}

START_TEST(nvfp4_disagreement_set)
{
    tally t = {"disagreement", 0, 0};
    ck_assert(lowp_codec_init(&cv_e4m3, LOWP_E4M3, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, NULL,
                              0) == 0);
    ck_assert(lowp_codec_init(&cv_e2m1, LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_ON, NULL,
                              0) == 0);
    /* S values: the three of ref/notes/formats.md 5.8 (S = 2688/gamax), then round and random ones. */
    float Ss[16];
    const char *why[16];
    int nS = 0;
    for (int k = 0; k < 3; k++) {
        Ss[nS] = 2688.0f / lowp_f32_from_bits(s58[k][0]);
        why[nS++] = " [ref/notes/formats.md 5.8]";
    }
    Ss[nS] = 1.0f, why[nS++] = " [S = 1]";
    Ss[nS] = 6.0f, why[nS++] = " [gamax 448]";
    Ss[nS] = 2688.0f, why[nS++] = " [gamax 1]";
    uint64_t s = lowp_test_stream(seed, 77, 0, 0);
    for (int k = 0; k < (full ? 6 : 1); k++) {
        Ss[nS] = 2688.0f / random_magnitude(&s, -10, 20);
        why[nS++] = " [random]";
    }
    uint64_t scanned = 0;
    long checked = 0;
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    for (int k = 0; k < nS; k++) {
        lowp_oracle_nvfp4_diff d;
        ck_assert(lowp_oracle_nvfp4_diff_compute(Ss[k], &d) == 0);
        report_set(&d, why[k]);
        t.n += 1;
        long bad = 0;
        if (full || k < 3) /* quick tier: the amax scan for the 5.8 S values only */
            bad += brute_amax(&d, &t, &scanned);
        /* The q list: exactly the q whose factors differ (native arithmetic). */
        size_t nq = 0;
        for (unsigned q = 0; q <= 0x7E; q++)
            nq += lowp_f32_bits(nat_o(0, Ss[k], (uint8_t)q)) !=
                  lowp_f32_bits(nat_o(1, Ss[k], (uint8_t)q));
        if (nq != d.n_q) {
            bad++;
            if (tally_show(&t))
                printf("disagreement S=0x%08" PRIx32 ": %zu scale codes have different factors, "
                       "the enumeration lists %zu\n",
                       lowp_f32_bits(Ss[k]), nq, d.n_q);
        }
        /* Full tier: brute-force every q. Quick tier: q = 0 and the next q in the list,
         * and for the 5.8 S values the q of the vector. */
        uint8_t q58 =
            k < 3 ? lowp_oracle_nvfp4_scale_code(0, Ss[k], lowp_f32_from_bits(s58[k][1])) : 0;
        for (size_t j = 0; j < d.n_q; j++)
            if (full || j < 2 || d.q[j].q == q58)
                bad += brute_q(&d, &d.q[j], &t, &scanned);
        bad += block_c_on_set(&d, &t, &checked);
        if (k < 3) { /* the 5.8 vector is in the set, with the table's codes */
            float m = lowp_f32_from_bits(s58[k][1]), x = lowp_f32_from_bits(s58[k][2]);
            uint8_t q = lowp_oracle_nvfp4_scale_code(0, Ss[k], m);
            const lowp_oracle_f32_run *r = NULL;
            for (size_t j = 0; j < d.n_q; j++)
                if (d.q[j].q == q)
                    r = in_runs(d.q[j].runs, d.q[j].n_runs, lowp_f32_bits(x));
            int ok = q == lowp_oracle_nvfp4_scale_code(1, Ss[k], m) &&
                     !in_runs(d.amax_runs, d.n_amax_runs, lowp_f32_bits(m)) && r != NULL &&
                     r->a == s58[k][3] && r->b == s58[k][4];
            printf("  ref/notes/formats.md 5.8 vector %d (amax 0x%08" PRIx32 ", x 0x%08" PRIx32 "): %s\n",
                   k + 1, s58[k][1], s58[k][2], ok ? "in the set, codes as the table" : "MISSING");
            if (!ok) {
                bad++;
                if (tally_show(&t))
                    printf("disagreement: ref/notes/formats.md 5.8 vector %d is not in the set\n", k + 1);
            }
        }
        (void)bad;
        lowp_oracle_nvfp4_diff_free(&d);
    }
    clock_gettime(CLOCK_MONOTONIC, &w1);
    printf("disagreement: %d S values, %" PRIu64 " binary32 values brute-forced, %ld blocks "
           "through lowp_block_quantize, %.1f s\n",
           nS, scanned, checked,
           (double)(w1.tv_sec - w0.tv_sec) + 1e-9 * (double)(w1.tv_nsec - w0.tv_nsec));
    tally_end(&t);
    ck_assert_msg(t.bad == 0, "the disagreement set is wrong in %llu places", t.bad);
}
END_TEST

/* ---------------------------------------------------------------------------------------
 * main
 * ------------------------------------------------------------------------------------- */

static Suite *oracle_block_suite(void)
{
    Suite *s = suite_create("oracle_block");
    TCase *tc = lowp_test_tcase(s, "oracle_block", full ? 5400 : 900,
                                LOWP_TESTS(oracle_tables_match_block_h,
                                           oracle_arithmetic_is_binary32,
                                           global_scale_derivations));
    /* the loop tests, then the rest, in this order */
    tcase_add_loop_test(tc, special_scale_grid, 0, n_combos);
    tcase_add_loop_test(tc, random_blocks, 0, n_combos);
    tcase_add_test(tc, golden_vectors);
    tcase_add_test(tc, nvfp4_disagreement_set);
    return s;
}

int main(int argc, char **argv)
{
    full = lowp_test_tier("test_oracle_block", argc, argv);
    seed = lowp_test_seed("oracle_block", seed);
    const char *vd = getenv("LOWP_VECTORS_DIR");
    if (vd != NULL && *vd != '\0') {
        snprintf(vectors_dir, sizeof vectors_dir, "%s", vd);
    } else { /* this file is tests/test_oracle_block.c in the source tree */
        snprintf(vectors_dir, sizeof vectors_dir, "%s", __FILE__);
        char *sl = strrchr(vectors_dir, '/');
        if (sl != NULL)
            *sl = '\0';
        else
            snprintf(vectors_dir, sizeof vectors_dir, ".");
        strncat(vectors_dir, "/../vectors/block", sizeof vectors_dir - strlen(vectors_dir) - 1);
    }
    printf("oracle_block: %s tier, seed 0x%016" PRIx64 " (LOWP_SEED overrides), vectors %s\n",
           full ? "full" : "quick", seed, vectors_dir);
    build_combos();
    build_ties(LOWP_E2M1, lowp_format_max_code(LOWP_E2M1));
    build_ties(LOWP_E4M3, lowp_format_max_code(LOWP_E4M3));
    build_ties(LOWP_E5M2, lowp_format_max_code(LOWP_E5M2));
    fflush(stdout);

    /* No fork: the totals live in this process, and the tests are pure computations. */
    const int failed = lowp_test_run(oracle_block_suite(), LOWP_TEST_NOFORK, NULL);
    printf("oracle_block: %llu cases, %llu mismatches\n", total_cases, total_bad);
    return (failed || total_bad) ? EXIT_FAILURE : EXIT_SUCCESS;
}
