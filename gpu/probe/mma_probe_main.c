/* gpu/probe/mma_probe_main.c: lowp_gpu_mma_probe, which measures which parameters of lowp's
 * tensor-core model (lowp/mma.h) the hardware's
 *     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
 * follows, in one run. Device code: gpu/probe/mma_probe.cu.
 *
 *   lowp_gpu_mma_probe REPORT.md [--quick]
 *
 * 1. Layout: two tiles of exact small integers (a one-hot A picks one B row per output)
 *    must come back exactly; otherwise the fragment layout is wrong and nothing else
 *    means anything (reported first, exit 1).
 * 2. Probes: every hand-made vector of lowp_mma_probes() in a tile of its own (all 16
 *    rows = a, all 8 columns = b, all C = c: the 128 outputs must agree), compared with
 *    its hand-computed prediction, its named alternative and every candidate.
 * 3. Random differential test: 10^7 outputs (--quick: 10^6) in tiles of 12 adversarial
 *    kinds (uniform bits with specials, narrow exponents, a dominant term with the rest
 *    5..35 binades below, dominant C, cancellation against C, cancelling pairs,
 *    tiny/subnormal, zeros beside huge partners, halves k0..7 / k8..15, overflow, carries,
 *    NaN/Inf/-0/subnormal sprinkled), each output compared bit for bit with the model
 *    under every candidate: group {8, 16} x n_frac 23..27 x C in window {0, 1} x zero
 *    rule {arithmetic.py, e_zero -132, -133, -134, skip} x prod_norm {0, 1} = 200 sets
 *    (plus lowp_mma_sm90_bf16 if it is none of them). OpenMP over tiles.
 * 4. The f16 instruction (mma.sync...f32.f16.f16.f32, what Triton 3.6 emits for an FP8
 *    tl.dot on sm_90, E4M3 operands widened to f16): the probes whose operands are all exact
 *    in f16, and 10^6 outputs (--quick: 10^5) of tiles of E4M3 values (as Triton's Q.K and
 *    P.V see them: any E4M3 x any E4M3, P in [0, 1] x V with a growing C, and C swamping the
 *    products), each compared with lowp_mma_sm90_bf16 on the same values: whether the f16
 *    datapath is the measured bf16 one (lowp/certify.h's mma_frac 25 for it rests on this).
 * 5. REPORT.md: device, summary, layout, probe table, candidate table (mismatches per
 *    kind, sorted), the first mismatching cases of the best candidates and the default,
 *    the f16 section. One summary line on stdout.
 * Exit: 0 iff lowp_mma_sm90_bf16 matches every probe and every random output (bf16 and f16)
 * and the layout check passes; 1 otherwise; 2 usage or file error; 3 CUDA error; 77 no GPU.
 * Cases depend only on the seed (LOWP_SEED overrides the default) and the tile index. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_parse.h"

#include "lowp/cases.h"
#include "lowp/format.h"
#include "lowp/mma.h"
#include "lowp_test_base.h" /* tests/lib, named in gpu/probe/mma.cmake */

/* gpu/probe/mma_probe.cu (declared identically there). */
int lowp_mma_gpu_device(char *desc, size_t len);
int lowp_mma_gpu_run(const uint16_t *A, const uint16_t *B, const uint32_t *C, uint32_t *D,
                     size_t ntiles, int f16, char *err, size_t errlen);
int lowp_mma_gpu_bf16_mul_sweep(unsigned long long *bad, unsigned long long *bad_sub,
                                uint32_t *first_bad, char *err, size_t errlen);

#define FULL_OUTPUTS 10000000u
#define QUICK_OUTPUTS 1000000u
#define NKINDS 12
#define NCAND_MAX 256
#define NFIRST 3
#define NLAYOUT 2
#define DETAIL_BEST 10

enum { K_UNIFORM, K_NARROW, K_WINDOW, K_CDOM, K_CANCEL, K_PAIRS, K_TINY, K_ZEROS, K_HALVES,
       K_OVF, K_CARRY, K_SPECIAL };
static const char *kind_name[NKINDS] = {"uniform", "narrow", "window",  "c-dom",
                                        "cancel-c", "pairs", "tiny",    "zeros",
                                        "halves",  "ovf",    "carry",   "specials"};

static uint64_t seed = LOWP_DEFAULT_SEED;

/* ---------------------------------------------------------------------------------------
 * Helpers
 * ------------------------------------------------------------------------------------- */

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (p == NULL) {
        fprintf(stderr, "lowp_gpu_mma_probe: out of memory (%zu x %zu bytes)\n", n, size);
        exit(2);
    }
    return p;
}

static uint64_t nx(uint64_t *s) /* one lowp_splitmix64 step, the one RNG */
{
    return lowp_splitmix64(s);
}

static uint16_t special_bf(uint64_t *s)
{
    static const uint16_t sp[] = {0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0000,
                                  0x8000, 0x0001, 0x807F, 0x7F7F, 0xFF7F};
    return sp[nx(s) % (sizeof sp / sizeof sp[0])];
}

static uint32_t special_f(uint64_t *s)
{
    static const uint32_t sp[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,
                                  0x7FC00000u, 0xFFC00123u, 0x7F800001u, 0x00000001u,
                                  0x807FFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u};
    return sp[nx(s) % (sizeof sp / sizeof sp[0])];
}

/* ---------------------------------------------------------------------------------------
 * Tiles: A[16][16], B[16][8] (k-major), C[16][8] (see gpu/probe/mma_probe.cu)
 * ------------------------------------------------------------------------------------- */

#define AI(i, k) ((i) * 16 + (k))
#define BI(k, j) ((k) * 8 + (j))
#define CI(i, j) ((i) * 8 + (j))

static double tile_dot(const uint16_t *A, const uint16_t *B, int i, int j)
{
    double d = 0;
    for (int k = 0; k < 16; k++)
        d += (double)lowp_test_bf16_value(A[AI(i, k)]) * (double)lowp_test_bf16_value(B[BI(k, j)]);
    return d;
}

static void gen_tile(uint64_t *s, int kind, uint16_t *A, uint16_t *B, uint32_t *C)
{
    const uint64_t r0 = nx(s);
    switch (kind) {
    case K_UNIFORM:
        for (int x = 0; x < 256; x++) {
            A[x] = (uint16_t)(nx(s) % 0x7F80u | (nx(s) & 0x8000u));
            if (nx(s) % 48 == 0)
                A[x] = special_bf(s);
        }
        for (int x = 0; x < 128; x++) {
            B[x] = (uint16_t)(nx(s) % 0x7F80u | (nx(s) & 0x8000u));
            if (nx(s) % 48 == 0)
                B[x] = special_bf(s);
            C[x] = (uint32_t)(nx(s) % 0x7F800000u) | (uint32_t)(nx(s) & 0x80000000u);
            if (nx(s) % 40 == 0)
                C[x] = special_f(s);
        }
        break;
    case K_NARROW: {
        const int e0 = lowp_test_irange(s, -30, 30);
        for (int x = 0; x < 256; x++)
            A[x] = lowp_test_bf16_draw(s, e0 - 2, e0 + 2);
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_draw(s, -2, 2);
            C[x] = nx(s) % 8 == 0 ? (uint32_t)(nx(s) & 0x80000000u)
                                  : lowp_test_f32_draw(s, e0 - 30, e0 + 8);
        }
        break;
    }
    case K_WINDOW: { /* per row a dominant product, the rest 5..35 binades below */
        const int e0 = lowp_test_irange(s, -40, 40);
        for (int i = 0; i < 16; i++) {
            const int d = (int)(nx(s) % 16);
            for (int k = 0; k < 16; k++)
                A[AI(i, k)] = k == d ? lowp_test_bf16_draw(s, e0, e0)
                                     : lowp_test_bf16_draw(s, e0 - 35, e0 - 5);
        }
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_draw(s, -1, 1);
            C[x] = nx(s) % 4 == 0 ? (uint32_t)(nx(s) & 0x80000000u)
                                  : lowp_test_f32_draw(s, e0 - 35, e0 + 3);
        }
        break;
    }
    case K_CDOM: /* C at or above the products, which sit 0..35 binades below */
        for (int x = 0; x < 256; x++)
            A[x] = lowp_test_bf16_draw(s, -3, 3);
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_draw(s, -3, 3);
            C[x] = lowp_test_f32_draw(s, -3, 35);
        }
        break;
    case K_CANCEL: { /* C = -(products) to within a few ulps */
        const int e0 = lowp_test_irange(s, -10, 10);
        for (int x = 0; x < 256; x++)
            A[x] = lowp_test_bf16_draw(s, e0 - 2, e0 + 2);
        for (int x = 0; x < 128; x++)
            B[x] = lowp_test_bf16_draw(s, -2, 2);
        for (int i = 0; i < 16; i++)
            for (int j = 0; j < 8; j++) {
                const float d = (float)-tile_dot(A, B, i, j);
                uint32_t cb = lowp_f32_bits(d);
                if (d != 0.0f)
                    cb = (uint32_t)((int64_t)cb + lowp_test_irange(s, -3, 3));
                else
                    cb = lowp_test_f32_draw(s, e0 - 30, e0 - 20);
                C[CI(i, j)] = cb;
            }
        break;
    }
    case K_PAIRS: { /* x*y - x*y' with y' = y or its neighbour, a small rest */
        const int e0 = lowp_test_irange(s, -20, 20);
        for (int i = 0; i < 16; i++) {
            for (int m = 0; m < 8; m++) {
                A[AI(i, 2 * m)] = lowp_test_bf16_draw(s, e0 - 1, e0 + 1);
                A[AI(i, 2 * m + 1)] = A[AI(i, 2 * m)] ^ 0x8000u;
            }
            if (nx(s) & 1)
                A[AI(i, nx(s) % 16)] = lowp_test_bf16_draw(s, e0 - 30, e0 - 20);
        }
        for (int j = 0; j < 8; j++)
            for (int m = 0; m < 8; m++) {
                B[BI(2 * m, j)] = lowp_test_bf16_draw(s, -1, 1);
                B[BI(2 * m + 1, j)] = (uint16_t)(B[BI(2 * m, j)] + (nx(s) % 3 == 0 ? 1 : 0));
            }
        for (int x = 0; x < 128; x++)
            C[x] = nx(s) % 3 == 0 ? (uint32_t)(nx(s) & 0x80000000u)
                                  : lowp_test_f32_draw(s, e0 - 30, e0 - 20);
        break;
    }
    case K_TINY:
        if (r0 & 4) { /* every product below 2^-133 (a zero term's e_zero), C = +-0 */
            for (int i = 0; i < 16; i++) {
                for (int k = 0; k < 16; k++)
                    A[AI(i, k)] = lowp_test_bf16_draw(s, -82, -68);
                A[AI(i, nx(s) % 16)] = (uint16_t)(nx(s) & 0x8000u);
            }
            for (int x = 0; x < 128; x++) {
                B[x] = lowp_test_bf16_draw(s, -82, -68);
                C[x] = (uint32_t)(nx(s) & 0x80000000u);
            }
            break;
        }
        for (int x = 0; x < 256; x++) {
            const uint64_t r = nx(s);
            A[x] = r % 8 == 0 ? (uint16_t)((r >> 8) & 0x807Fu) : lowp_test_bf16_draw(s, -82, -55);
        }
        for (int x = 0; x < 128; x++) {
            const uint64_t r = nx(s);
            B[x] = r % 4 == 1 ? (uint16_t)(r & 0x8000u) : lowp_test_bf16_draw(s, -82, -55);
            switch ((r >> 20) % 4) {
            case 0:
                C[x] = (uint32_t)(r & 0x80000000u);
                break;
            case 1:
                C[x] = (uint32_t)((r >> 24) & 0x807FFFFFu);
                break;
            default:
                C[x] = lowp_test_f32_draw(s, -149, -118);
            }
        }
        break;
    case K_ZEROS: { /* zero A where B is huge: does 0 * 2^100 count as 2^-26? */
        const uint64_t mask = nx(s);
        for (int i = 0; i < 16; i++) {
            const int use_mask = nx(s) % 8 != 0;
            for (int k = 0; k < 16; k++)
                A[AI(i, k)] = (use_mask && (mask >> k & 1)) ? (uint16_t)(nx(s) & 0x8000u)
                                                            : lowp_test_bf16_draw(s, -60, 10);
        }
        for (int k = 0; k < 16; k++)
            for (int j = 0; j < 8; j++)
                B[BI(k, j)] = (mask >> k & 1) ? lowp_test_bf16_draw(s, 20, 127)
                                              : lowp_test_bf16_draw(s, -60, 10);
        for (int x = 0; x < 128; x++)
            C[x] = nx(s) % 2 ? (uint32_t)(nx(s) & 0x80000000u) : lowp_test_f32_draw(s, -140, 20);
        break;
    }
    case K_HALVES: { /* large terms in one half (some zero), small ones in the other */
        const int big_lo = (int)(r0 & 1), e0 = lowp_test_irange(s, -20, 20);
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 16; k++) {
                const int in_big = (k < 8) == big_lo;
                A[AI(i, k)] = in_big ? lowp_test_bf16_draw(s, e0 - 2, e0)
                                     : lowp_test_bf16_draw(s, e0 - 30, e0 - 15);
                if (in_big && nx(s) % 3 == 0)
                    A[AI(i, k)] = 0;
            }
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_draw(s, -1, 1);
            C[x] = nx(s) % 4 == 0 ? lowp_test_f32_draw(s, e0 - 1, e0 + 1)
                                  : lowp_test_f32_draw(s, e0 - 30, e0 - 10);
        }
        break;
    }
    case K_OVF:
        for (int x = 0; x < 256; x++)
            A[x] = lowp_test_bf16_draw(s, 55, 127);
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_draw(s, 55, 127);
            C[x] = nx(s) % 3 == 0 ? (uint32_t)(nx(s) & 0x80000000u)
                                  : lowp_test_f32_draw(s, 100, 127);
        }
        break;
    case K_CARRY: { /* one sign, equal exponents, large significands: many carries */
        const int e0 = lowp_test_irange(s, -30, 30), neg = (int)(r0 & 1);
        for (int x = 0; x < 256; x++)
            A[x] = lowp_test_bf16_make(neg, e0, 0x60u | (unsigned)(nx(s) & 0x1Fu));
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_make(0, 0, 0x60u | (unsigned)(nx(s) & 0x1Fu));
            C[x] = lowp_test_f32_make((int)(nx(s) & 1), e0 + lowp_test_irange(s, -24, 6),
                                      (uint32_t)(nx(s) >> 20));
        }
        break;
    }
    default: { /* K_SPECIAL: narrow data with NaN / Inf / -0 / subnormals sprinkled */
        const int e0 = lowp_test_irange(s, -20, 20);
        for (int x = 0; x < 256; x++)
            A[x] = lowp_test_bf16_draw(s, e0 - 3, e0 + 3);
        for (int x = 0; x < 128; x++) {
            B[x] = lowp_test_bf16_draw(s, -3, 3);
            C[x] = nx(s) % 8 == 0 ? special_f(s) : lowp_test_f32_draw(s, e0 - 10, e0 + 5);
        }
        for (int i = 0; i < 16; i++)
            if (nx(s) % 3 == 0)
                A[AI(i, nx(s) % 16)] = special_bf(s);
        for (int j = 0; j < 8; j++)
            if (nx(s) % 3 == 0)
                B[BI(nx(s) % 16, j)] = special_bf(s);
    }
    }
}

static uint16_t bf16_of_int(int v) /* exact for |v| <= 256 */
{
    return (uint16_t)(lowp_f32_bits((float)v) >> 16);
}

/* Layout tiles: exact small integers, results never zero (C is a half- or quarter-
 * integer), so every model and every zero rule gives the same, exact, answer. */
static void layout_tile(int which, uint16_t *A, uint16_t *B, uint32_t *C, uint32_t *want)
{
    int ai[16][16], bi[16][8];
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++)
            ai[i][k] = which == 0 ? (i * 7 + k * 3) % 9 - 4 : (k == (5 * i + 3) % 16);
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 8; j++)
            bi[k][j] = which == 0 ? (k * 5 + j * 11) % 7 - 3 : k * 8 + j + 1;
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++)
            A[AI(i, k)] = bf16_of_int(ai[i][k]);
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 8; j++)
            B[BI(k, j)] = bf16_of_int(bi[k][j]);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            const float c = which == 0 ? (float)(i * 8 + j) + 0.5f : -(float)(i * 8 + j) - 0.25f;
            int dot = 0;
            for (int k = 0; k < 16; k++)
                dot += ai[i][k] * bi[k][j];
            C[CI(i, j)] = lowp_f32_bits(c);
            want[CI(i, j)] = lowp_f32_bits((float)dot + c); /* exact: |.| < 2^12, quarters */
        }
}

/* ---------------------------------------------------------------------------------------
 * Candidates
 * ------------------------------------------------------------------------------------- */

/* lowp_mma_candidates, and the record's position among them in *def (appended when it is
 * none of them, so that it is always evaluated). out holds NCAND_MAX. */
static size_t candidates(lowp_mma_params *out, size_t *def)
{
    const size_t n = lowp_mma_candidates(out);
    const lowp_mma_params *D = &lowp_mma_sm90_bf16;
    for (size_t i = 0; i < n; i++) {
        const lowp_mma_params *c = &out[i];
        if (c->group == D->group && c->n_frac == D->n_frac &&
            c->c_in_window == D->c_in_window && c->zero_mode == D->zero_mode &&
            (c->zero_mode != LOWP_MMA_ZERO_FIXED || c->e_zero == D->e_zero) &&
            c->prod_norm == D->prod_norm) {
            *def = i;
            return n;
        }
    }
    out[n] = *D; /* the record is none of the sweep's sets: evaluate it too */
    *def = n;
    return n + 1;
}

/* ---------------------------------------------------------------------------------------
 * Evaluation
 * ------------------------------------------------------------------------------------- */

typedef struct firstmis {
    size_t tile;
    int i, j;
    uint32_t hw, model;
} firstmis;

typedef struct tally {
    unsigned long long cnt[NCAND_MAX][NKINDS];
    firstmis first[NCAND_MAX][NFIRST];
    int nfirst[NCAND_MAX];
    unsigned long long nan_other; /* hardware NaN outputs that are not 0x7FFFFFFF */
    uint32_t nan_other_example;
} tally;

static void gather(const uint16_t *A, const uint16_t *B, int i, int j, uint16_t *a, uint16_t *b)
{
    for (int k = 0; k < 16; k++) {
        a[k] = A[AI(i, k)];
        b[k] = B[BI(k, j)];
    }
}

static int is_nan_bits(uint32_t u)
{
    return (u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu) != 0;
}

/* ---------------------------------------------------------------------------------------
 * Report
 * ------------------------------------------------------------------------------------- */

static void hexrow(FILE *f, const uint16_t *v)
{
    for (int k = 0; k < 16; k++)
        fprintf(f, "%04x%s", v[k], k < 15 ? " " : "");
}

/* Candidates best first: fewest mismatches (random + probes), then sweep order. */
static const unsigned long long *sort_key;
static int cmp_rank(const void *x, const void *y)
{
    const size_t a = *(const size_t *)x, b = *(const size_t *)y;
    if (sort_key[a] != sort_key[b])
        return sort_key[a] < sort_key[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static const char *usage = "usage: lowp_gpu_mma_probe REPORT.md [--quick]\n";

/* ---- the f16 instruction on E4M3-valued tiles (step 4) ----------------------------------- */
#define F16_FULL_OUTPUTS 1000000u
#define F16_QUICK_OUTPUTS 100000u
enum { F_ANY, F_PV, F_CBIG, F_NKINDS };
static const char *f16_kind_name[F_NKINDS] = {"e4m3 x e4m3, C 0 or small", "P in [0,1] x V, C growing",
                                              "C swamping the products"};

/* A random finite E4M3 value (code 0x00..0x7E, either sign; lim < 0x7F bounds the code), as
 * bf16 bits: exact (4 significant bits, exponents 2^-9..2^8), and exact in f16 too. */
static uint16_t e4m3_bf(uint64_t *s, unsigned lim)
{
    unsigned code = (unsigned)(lowp_splitmix64(s) % (lim + 1));
    const float v = lowp_decode_f32(LOWP_E4M3, (uint16_t)code);
    const uint16_t bits = (uint16_t)(lowp_f32_bits(v) >> 16);
    return (lowp_splitmix64(s) & 1) ? (uint16_t)(bits | 0x8000u) : bits;
}

static void gen_f16_tile(uint64_t *s, int kind, uint16_t *A, uint16_t *B, uint32_t *C)
{
    for (int i = 0; i < 16; i++)
        for (int k = 0; k < 16; k++)
            A[AI(i, k)] = kind == F_PV ? (uint16_t)(e4m3_bf(s, 0x38) & 0x7FFFu) : e4m3_bf(s, 0x7E);
    for (int k = 0; k < 16; k++)
        for (int j = 0; j < 8; j++)
            B[BI(k, j)] = e4m3_bf(s, 0x7E);
    for (int x = 0; x < 128; x++) {
        /* C: 0, small, a running sum of P.V (up to 2^14) or one swamping the products (2^10..2^24) */
        const uint64_t r = lowp_splitmix64(s);
        int e = kind == F_ANY ? -12 + (int)(r % 16) : kind == F_PV ? (int)(r % 15) : 10 + (int)(r % 15);
        float c = ldexpf(1.0f + (float)((r >> 8) & 0xFFFFFF) * 0x1p-24f, e);
        if ((r >> 40) & 1)
            c = -c;
        if (kind == F_ANY && (r >> 41) % 4 == 0)
            c = 0.0f;
        C[x] = lowp_f32_bits(c);
    }
}

/* 1 when every value of the 16 bf16 operands is exact in f16 (normal or subnormal range,
 * no more than 11 significant bits), so that the f16 instruction sees the same values. */
static int f16_exact(const uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const float v = lowp_f32_from_bits((uint32_t)x[i] << 16);
        if (v != v || v > 65504.0f || v < -65504.0f)
            return 0;
        const float a = v < 0 ? -v : v;
        if (a != 0.0f && a < 0x1p-24f)
            return 0;
        if (a != 0.0f && a < 0x1p-14f && ldexpf(a, 24) != (float)(long)ldexpf(a, 24))
            return 0; /* a subnormal f16 is a multiple of 2^-24 */
    }
    return 1;
}

int main(int argc, char **argv)
{
    const char *report = NULL;
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (argv[i][0] != '-' && report == NULL)
            report = argv[i];
        else {
            fputs(usage, stderr);
            return 2;
        }
    }
    if (report == NULL) {
        fputs(usage, stderr);
        return 2;
    }
    const char *env = getenv("LOWP_SEED");
    if (env != NULL && *env != '\0') {
        seed = lowp_cli_parse_seed("LOWP_SEED", env);
    }
    char dev[512];
    const int drc = lowp_mma_gpu_device(dev, sizeof dev);
    if (drc == 77) {
        printf("lowp_gpu_mma_probe: skipped, %s\n", dev);
        return 77;
    }
    if (drc == 3) {
        fprintf(stderr, "lowp_gpu_mma_probe: %s\n", dev);
        return 3;
    }
    if (drc == 1)
        fprintf(stderr, "lowp_gpu_mma_probe: warning: %s is not sm_90; the record is sm_90's\n",
                dev);
    FILE *rep = fopen(report, "w");
    if (rep == NULL) {
        fprintf(stderr, "lowp_gpu_mma_probe: cannot write %s\n", report);
        return 2;
    }
    const double t_start = lowp_test_now();

    /* Candidates. */
    static lowp_mma_params cand[NCAND_MAX];
    size_t idef = 0;
    const size_t nc = candidates(cand, &idef);

    /* Tiles: layout, probes, random. */
    size_t nprobe;
    const lowp_mma_probe *probes = lowp_mma_probes(&nprobe);
    const size_t nout_target = quick ? QUICK_OUTPUTS : FULL_OUTPUTS;
    const size_t nrand = (nout_target + 127) / 128;
    const size_t t_probe0 = NLAYOUT, t_rand0 = NLAYOUT + nprobe, nt = t_rand0 + nrand;
    uint16_t *A = xcalloc(nt * 256, sizeof *A);
    uint16_t *B = xcalloc(nt * 128, sizeof *B);
    uint32_t *C = xcalloc(nt * 128, sizeof *C);
    uint32_t *D = xcalloc(nt * 128, sizeof *D);
    uint32_t layout_want[NLAYOUT][128];
    for (int w = 0; w < NLAYOUT; w++)
        layout_tile(w, A + (size_t)w * 256, B + (size_t)w * 128, C + (size_t)w * 128,
                    layout_want[w]);
    for (size_t p = 0; p < nprobe; p++) {
        const size_t t = t_probe0 + p;
        for (int i = 0; i < 16; i++)
            for (int k = 0; k < 16; k++)
                A[t * 256 + AI(i, k)] = probes[p].a[k];
        for (int k = 0; k < 16; k++)
            for (int j = 0; j < 8; j++)
                B[t * 128 + BI(k, j)] = probes[p].b[k];
        for (int x = 0; x < 128; x++)
            C[t * 128 + x] = probes[p].c;
    }
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < nrand; r++) {
        uint64_t s = lowp_test_stream(seed, 0x6d6d61, r, 0);
        const size_t t = t_rand0 + r;
        gen_tile(&s, (int)(r % NKINDS), A + t * 256, B + t * 128, C + t * 128);
    }
    const double t_gen = lowp_test_now();

    /* The hardware. */
    char err[512] = "";
    const int grc = lowp_mma_gpu_run(A, B, C, D, nt, 0, err, sizeof err);
    if (grc != 0) {
        fprintf(stderr, "lowp_gpu_mma_probe: %s\n", err);
        fprintf(rep, "# lowp_gpu_mma_probe: CUDA error\n\n%s\n", err);
        fclose(rep);
        return 3;
    }
    /* The BF16 multiply the FP4 decode relies on (gpu/kernels/decode.cu), all 2^32 products. */
    unsigned long long mul_bad = 0, mul_bad_sub = 0;
    uint32_t mul_first = 0;
    if (lowp_mma_gpu_bf16_mul_sweep(&mul_bad, &mul_bad_sub, &mul_first, err, sizeof err)) {
        fprintf(stderr, "lowp_gpu_mma_probe: %s\n", err);
        fprintf(rep, "# lowp_gpu_mma_probe: CUDA error\n\n%s\n", err);
        fclose(rep);
        return 3;
    }
    const double t_gpu = lowp_test_now();

    /* 1. Layout. */
    int layout_bad = 0;
    for (int w = 0; w < NLAYOUT; w++)
        for (int x = 0; x < 128; x++)
            layout_bad += D[(size_t)w * 128 + x] != layout_want[w][x];

    /* 2. Probes: lanes agree, hardware vs hand predictions and every candidate. */
    uint32_t *probe_hw = xcalloc(nprobe, sizeof *probe_hw);
    int *probe_lanes_bad = xcalloc(nprobe, sizeof *probe_lanes_bad);
    int *probe_ncand = xcalloc(nprobe, sizeof *probe_ncand);
    unsigned long long *cand_probe_bad = xcalloc(nc, sizeof *cand_probe_bad);
    int *probe_first_cand_bad = xcalloc(nc, sizeof *probe_first_cand_bad);
    for (size_t c = 0; c < nc; c++)
        probe_first_cand_bad[c] = -1;
    for (size_t p = 0; p < nprobe; p++) {
        const size_t t = t_probe0 + p;
        probe_hw[p] = D[t * 128];
        for (int x = 1; x < 128; x++)
            probe_lanes_bad[p] += D[t * 128 + x] != probe_hw[p];
        float out[NCAND_MAX];
        lowp_mma_dot_add_bf16_multi(probes[p].a, probes[p].b, 16,
                                    lowp_f32_from_bits(probes[p].c), cand, nc, out);
        for (size_t c = 0; c < nc; c++) {
            if (lowp_f32_bits(out[c]) == probe_hw[p]) {
                probe_ncand[p]++;
            } else {
                cand_probe_bad[c]++;
                if (probe_first_cand_bad[c] < 0)
                    probe_first_cand_bad[c] = (int)p;
            }
        }
    }

    /* 3. Random outputs against every candidate. */
    const int nthr = omp_get_max_threads();
    tally *tl = xcalloc((size_t)nthr, sizeof *tl);
#pragma omp parallel
    {
        tally *T = &tl[omp_get_thread_num()];
        uint16_t a[16], b[16];
        float out[NCAND_MAX];
#pragma omp for schedule(static)
        for (size_t r = 0; r < nrand; r++) {
            const size_t t = t_rand0 + r;
            const int kind = (int)(r % NKINDS);
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 8; j++) {
                    gather(A + t * 256, B + t * 128, i, j, a, b);
                    const uint32_t hw = D[t * 128 + CI(i, j)];
                    if (is_nan_bits(hw) && hw != 0x7FFFFFFFu) {
                        if (T->nan_other++ == 0)
                            T->nan_other_example = hw;
                    }
                    lowp_mma_dot_add_bf16_multi(a, b, 16,
                                                lowp_f32_from_bits(C[t * 128 + CI(i, j)]),
                                                cand, nc, out);
                    for (size_t c = 0; c < nc; c++) {
                        const uint32_t m = lowp_f32_bits(out[c]);
                        if (m == hw)
                            continue;
                        T->cnt[c][kind]++;
                        if (T->nfirst[c] < NFIRST)
                            T->first[c][T->nfirst[c]++] = (firstmis){t, i, j, hw, m};
                    }
                }
        }
    }
    /* Merge: static schedule gives thread 0 the first tiles, so thread order is tile order. */
    static unsigned long long cnt[NCAND_MAX][NKINDS], tot[NCAND_MAX];
    static firstmis first[NCAND_MAX][NFIRST];
    static int nfirst[NCAND_MAX];
    unsigned long long nan_other = 0;
    uint32_t nan_other_example = 0;
    for (int th = 0; th < nthr; th++) {
        for (size_t c = 0; c < nc; c++) {
            for (int k = 0; k < NKINDS; k++)
                cnt[c][k] += tl[th].cnt[c][k];
            for (int x = 0; x < tl[th].nfirst[c] && nfirst[c] < NFIRST; x++)
                first[c][nfirst[c]++] = tl[th].first[c][x];
        }
        if (tl[th].nan_other && nan_other == 0)
            nan_other_example = tl[th].nan_other_example;
        nan_other += tl[th].nan_other;
    }
    unsigned long long kind_outputs[NKINDS] = {0};
    for (size_t r = 0; r < nrand; r++)
        kind_outputs[r % NKINDS] += 128;
    size_t order[NCAND_MAX];
    unsigned long long rank_key[NCAND_MAX];
    for (size_t c = 0; c < nc; c++) {
        for (int k = 0; k < NKINDS; k++)
            tot[c] += cnt[c][k];
        rank_key[c] = tot[c] + cand_probe_bad[c];
        order[c] = c;
    }
    sort_key = rank_key;
    qsort(order, nc, sizeof order[0], cmp_rank);
    const double t_model = lowp_test_now();

    /* 4. The f16 instruction: exact-in-f16 probes and E4M3-valued tiles vs lowp_mma_sm90_bf16. */
    size_t f16_probes = 0, f16_probe_bad = 0;
    const size_t nf = ((quick ? F16_QUICK_OUTPUTS : F16_FULL_OUTPUTS) + 127) / 128, nft = nprobe + nf;
    uint16_t *FA = xcalloc(nft * 256, sizeof *FA), *FB = xcalloc(nft * 128, sizeof *FB);
    uint32_t *FC = xcalloc(nft * 128, sizeof *FC), *FD = xcalloc(nft * 128, sizeof *FD);
    int *probe_f16 = xcalloc(nprobe, sizeof *probe_f16);
    memcpy(FA, A + t_probe0 * 256, nprobe * 256 * sizeof *FA);
    memcpy(FB, B + t_probe0 * 128, nprobe * 128 * sizeof *FB);
    memcpy(FC, C + t_probe0 * 128, nprobe * 128 * sizeof *FC);
    for (size_t p = 0; p < nprobe; p++)
        probe_f16[p] = f16_exact(probes[p].a, 16) && f16_exact(probes[p].b, 16);
    for (size_t r = 0; r < nf; r++) {
        uint64_t s = lowp_test_stream(seed, 0x663136, r, 0);
        gen_f16_tile(&s, (int)(r % F_NKINDS), FA + (nprobe + r) * 256, FB + (nprobe + r) * 128,
                     FC + (nprobe + r) * 128);
    }
    if (lowp_mma_gpu_run(FA, FB, FC, FD, nft, 1, err, sizeof err) != 0) {
        fprintf(stderr, "lowp_gpu_mma_probe: %s\n", err);
        fprintf(rep, "# lowp_gpu_mma_probe: CUDA error\n\n%s\n", err);
        fclose(rep);
        return 3;
    }
    for (size_t p = 0; p < nprobe; p++) {
        if (!probe_f16[p])
            continue;
        f16_probes++;
        const float m = lowp_mma_dot_add_bf16(probes[p].a, probes[p].b, 16, lowp_f32_from_bits(probes[p].c),
                                              &lowp_mma_sm90_bf16);
        for (int x = 0; x < 128; x++)
            if (FD[p * 128 + x] != lowp_f32_bits(m)) {
                f16_probe_bad++;
                probe_f16[p] = 2; /* differs */
                break;
            }
    }
    unsigned long long f16_bad[F_NKINDS] = {0}, f16_out[F_NKINDS] = {0};
    firstmis f16_first[NFIRST];
    int f16_nfirst = 0;
#pragma omp parallel
    {
        unsigned long long bad[F_NKINDS] = {0};
        uint16_t a[16], b[16];
#pragma omp for schedule(static)
        for (size_t r = 0; r < nf; r++) {
            const size_t t = nprobe + r;
            const int kind = (int)(r % F_NKINDS);
            for (int i = 0; i < 16; i++)
                for (int j = 0; j < 8; j++) {
                    gather(FA + t * 256, FB + t * 128, i, j, a, b);
                    const uint32_t hw = FD[t * 128 + CI(i, j)];
                    const uint32_t m = lowp_f32_bits(lowp_mma_dot_add_bf16(
                        a, b, 16, lowp_f32_from_bits(FC[t * 128 + CI(i, j)]), &lowp_mma_sm90_bf16));
                    if (m == hw)
                        continue;
                    bad[kind]++;
#pragma omp critical
                    if (f16_nfirst < NFIRST)
                        f16_first[f16_nfirst++] = (firstmis){t, i, j, hw, m};
                }
        }
#pragma omp critical
        for (int k = 0; k < F_NKINDS; k++)
            f16_bad[k] += bad[k];
    }
    unsigned long long f16_tot = 0;
    for (size_t r = 0; r < nf; r++)
        f16_out[r % F_NKINDS] += 128;
    for (int k = 0; k < F_NKINDS; k++)
        f16_tot += f16_bad[k];

    /* Verdict. */
    int lanes_bad = 0;
    for (size_t p = 0; p < nprobe; p++)
        lanes_bad += probe_lanes_bad[p] != 0;
    const int def_ok = layout_bad == 0 && lanes_bad == 0 && tot[idef] == 0 &&
                       cand_probe_bad[idef] == 0;
    size_t nperfect = 0;
    for (size_t c = 0; c < nc; c++)
        nperfect += rank_key[c] == 0;
    char ps[64], ps2[64];
    lowp_mma_params_str(&cand[idef], ps, sizeof ps);

    /* 4. Report. */
    FILE *f = rep;
    fprintf(f, "# mma.sync m16n8k16 bf16 -> f32: which model parameters the hardware follows\n\n");
    fprintf(f, "Generated by `lowp_gpu_mma_probe` (gpu/probe/mma_probe_main.c, gpu/probe/mma_probe.cu); the "
               "model is ref/hw/src/mma.c (lowp/mma.h).\n\n");
    fprintf(f, "- device: %s\n", dev);
    fprintf(f, "- mode: %s; seed 0x%016" PRIx64 " (LOWP_SEED); %d OpenMP threads\n",
            quick ? "--quick" : "full", seed, nthr);
    fprintf(f, "- tiles: %d layout + %zu probe + %zu random (%zu random outputs); %zu candidate "
               "parameter sets\n",
            NLAYOUT, nprobe, nrand, nrand * 128, nc);
    fprintf(f, "- time: generate %.1f s, GPU %.1f s, model %.1f s, total %.1f s\n\n",
            t_gen - t_start, t_gpu - t_gen, t_model - t_gpu, t_model - t_start);

    fprintf(f, "## Summary\n\n");
    fprintf(f, "- **lowp_mma_sm90_bf16 = `%s`: %s** (%llu random mismatches, %llu probe "
               "mismatches)\n",
            ps, def_ok ? "MATCHES the hardware" : "DOES NOT MATCH", tot[idef],
            cand_probe_bad[idef]);
    fprintf(f, "- BF16 multiply (`__hmul2`, all 2^32 pairs of BF16) vs binary32 rounded to "
               "BF16: %llu differ (%llu with a subnormal operand)%s",
            mul_bad, mul_bad_sub, mul_bad ? "" : "; subnormal inputs and outputs are kept\n");
    if (mul_bad)
        fprintf(f, ", e.g. a = %04x, b = %04x: **the FP4 decode's 2^126 step is unsafe**\n",
                (unsigned)(mul_first >> 16), (unsigned)(mul_first & 0xFFFF));
    fprintf(f, "- layout check (exact integer tiles): %s\n",
            layout_bad ? "**FAILED: the fragment layout is wrong; nothing below is meaningful**"
                       : "passed");
    fprintf(f, "- probe tiles whose 128 outputs disagree among themselves: %d\n", lanes_bad);
    fprintf(f, "- candidates with zero mismatches (probes and random): %zu", nperfect);
    for (size_t x = 0, shown = 0; x < nc && shown < 12; x++)
        if (rank_key[order[x]] == 0) {
            fprintf(f, "%s`%s`", shown ? ", " : ": ",
                    lowp_mma_params_str(&cand[order[x]], ps2, sizeof ps2));
            shown++;
        }
    fprintf(f, "\n- hardware NaN outputs other than 0x7FFFFFFF: %llu", nan_other);
    if (nan_other)
        fprintf(f, " (first: 0x%08x)", nan_other_example);
    fprintf(f, "\n\n");

    fprintf(f, "## How to read this\n\n"
               "Parameters (`lowp/mma.h`): `g` = products fused per step (16: one fused step; 8: "
               "k0..7 with C, then k8..15 with that result), `f` = n_frac, fraction bits kept "
               "below the largest term's exponent, `cin` = C inside the alignment window (1) or "
               "added exactly after (0), zero rule `zsub` (arithmetic.py: a zero operand is "
               "0*2^-126, so 0*2^100 counts as 2^-26) / `zN` (every zero term at exponent N, "
               "MMA-Sim fdpa.py e_zero) / `zskip` (zeros ignored), `pn` = products with "
               "significand >= 2 renormalised. Rules outside the parameters (Inf on overflow, "
               "zero signs, canonical NaN) are fixed; the probes marked with a rule alternative "
               "test them. A candidate is right only with 0 everywhere. If none is, the "
               "probe table and the per-kind columns say which behaviour is missing: e.g. "
               "mismatches only in `tiny` / `zeros` point at the zero rule, only in `specials` / "
               "`uniform` at NaN/Inf handling, a probe matching its rule alternative at that "
               "rule.\n\n");

    fprintf(f, "## Probes (one tile each, all 128 outputs the same case)\n\n");
    fprintf(f, "| probe | hardware | default predicts | | alternative | alt predicts | | "
               "candidates agreeing | lanes | what it reveals |\n");
    fprintf(f, "|---|---|---|---|---|---|---|---:|---|---|\n");
    for (size_t p = 0; p < nprobe; p++) {
        const lowp_mma_probe *q = &probes[p];
        fprintf(f, "| %s | 0x%08x | 0x%08x | %s | %s | ", q->name, probe_hw[p], q->expect,
                probe_hw[p] == q->expect ? "ok" : "**differs**", q->has_alt ? q->alt_what : "");
        if (q->has_alt)
            fprintf(f, "0x%08x | %s |", q->alt, probe_hw[p] == q->alt ? "**hardware**" : "");
        else
            fprintf(f, " | |");
        fprintf(f, " %d/%zu | %s | %s |\n", probe_ncand[p], nc,
                probe_lanes_bad[p] ? "**differ**" : "same", q->reveals);
    }
    fprintf(f, "\nA probe's inputs: `lowp_mma_probes()` in ref/hw/src/mma.c (a[16], b[16] as bf16 "
               "bits, c as binary32 bits).\n\n");

    fprintf(f, "## Candidates, best first\n\n");
    fprintf(f, "Random mismatches per kind (outputs per kind: ~%llu).\n\n", kind_outputs[0]);
    fprintf(f, "| # | parameters | random | probes | first probe missed |");
    for (int k = 0; k < NKINDS; k++)
        fprintf(f, " %s |", kind_name[k]);
    fprintf(f, "\n|---:|---|---:|---:|---|");
    for (int k = 0; k < NKINDS; k++)
        fprintf(f, "---:|");
    fprintf(f, "\n");
    for (size_t x = 0; x < nc; x++) {
        const size_t c = order[x];
        fprintf(f, "| %zu | `%s`%s | %llu | %llu | %s |", x + 1,
                lowp_mma_params_str(&cand[c], ps2, sizeof ps2), c == idef ? " (default)" : "",
                tot[c], cand_probe_bad[c],
                probe_first_cand_bad[c] >= 0 ? probes[probe_first_cand_bad[c]].name : "");
        for (int k = 0; k < NKINDS; k++)
            fprintf(f, " %llu |", cnt[c][k]);
        fprintf(f, "\n");
    }

    fprintf(f, "\n## First mismatching random outputs (default and the %d best)\n\n",
            DETAIL_BEST);
    fprintf(f, "Each: tile, output (i, j), kind; a = A row i, b = B column j (k = 0..15, bf16 "
               "bits), c (binary32 bits); hardware and model results.\n\n");
    for (size_t x = 0; x <= (size_t)DETAIL_BEST && x <= nc; x++) {
        const size_t c = x == 0 ? idef : order[x - 1];
        if (x > 0 && c == idef)
            continue;
        fprintf(f, "### `%s`%s: %llu random mismatches\n\n",
                lowp_mma_params_str(&cand[c], ps2, sizeof ps2), c == idef ? " (default)" : "",
                tot[c]);
        if (nfirst[c] == 0) {
            fprintf(f, "none\n\n");
            continue;
        }
        fprintf(f, "```\n");
        for (int m = 0; m < nfirst[c]; m++) {
            const firstmis *q = &first[c][m];
            uint16_t a[16], b[16];
            gather(A + q->tile * 256, B + q->tile * 128, q->i, q->j, a, b);
            fprintf(f, "tile %zu (%d,%d) kind %s\n  a = ", q->tile, q->i, q->j,
                    kind_name[(q->tile - t_rand0) % NKINDS]);
            hexrow(f, a);
            fprintf(f, "\n  b = ");
            hexrow(f, b);
            fprintf(f, "\n  c = %08x  hardware %08x (%a)  model %08x (%a)\n",
                    C[q->tile * 128 + CI(q->i, q->j)], q->hw,
                    (double)lowp_f32_from_bits(q->hw), q->model,
                    (double)lowp_f32_from_bits(q->model));
        }
        fprintf(f, "```\n\n");
    }
    fprintf(f, "## The f16 instruction on E4M3 values (mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32)\n\n");
    fprintf(f, "Triton 3.6 compiles an FP8 `tl.dot` on sm_90 (SGLang's FP8 GQA decode) to this instruction, "
               "its E4M3 operands widened to f16 exactly. The same tiles through it, compared with "
               "lowp_mma_sm90_bf16 on the same values (every operand is exact in f16 and in bf16):\n\n");
    fprintf(f, "- probes with f16-exact operands: %zu of %zu, %zu differ from the model%s\n", f16_probes, nprobe,
            f16_probe_bad, f16_probe_bad ? ":" : "");
    for (size_t p = 0; p < nprobe; p++)
        if (probe_f16[p] == 2)
            fprintf(f, "  - %s: hardware (f16) 0x%08x\n", probes[p].name, FD[p * 128]);
    fprintf(f, "- random E4M3-valued tiles: %zu outputs, %llu differ from the model\n\n", nf * 128, f16_tot);
    fprintf(f, "| kind | outputs | differ |\n|---|---:|---:|\n");
    for (int k = 0; k < F_NKINDS; k++)
        fprintf(f, "| %s | %llu | %llu |\n", f16_kind_name[k], f16_out[k], f16_bad[k]);
    fprintf(f, "\n%s\n", f16_tot == 0 && f16_probe_bad == 0
                               ? "**The f16 datapath on these values is the measured bf16 one** "
                                 "(`g16 f25 cin1 z-133 pn0`): lowp/certify.h's mma_frac 25 for it rests on this."
                               : "**The f16 instruction does not follow the bf16 model on these values.**");
    for (int x = 0; x < f16_nfirst; x++)
        fprintf(f, "- tile %zu row %d col %d: hardware 0x%08x, model 0x%08x\n", f16_first[x].tile,
                f16_first[x].i, f16_first[x].j, f16_first[x].hw, f16_first[x].model);
    fprintf(f, "\n");
    const int close_rc = fclose(f);

    printf("lowp_gpu_mma_probe: %zu random outputs + %zu probes on %s: default %s %s "
           "(%llu random, %llu probe mismatches); %zu of %zu candidates match everything; "
           "layout %s; BF16 multiply %llu of 2^32 differ; f16 instruction on E4M3 values: %llu of %zu "
           "random and %zu of %zu probes differ from the model; report %s (%.1f s)\n",
           nrand * 128, nprobe, dev, ps, def_ok ? "MATCHES" : "DOES NOT MATCH", tot[idef],
           cand_probe_bad[idef], nperfect, nc, layout_bad ? "FAILED" : "ok", mul_bad, f16_tot, nf * 128,
           f16_probe_bad, f16_probes, report, lowp_test_now() - t_start);
    free(A);
    free(B);
    free(C);
    free(D);
    free(tl);
    free(probe_hw);
    free(probe_lanes_bad);
    free(probe_ncand);
    free(cand_probe_bad);
    free(probe_first_cand_bad);
    if (close_rc != 0) {
        fprintf(stderr, "lowp_gpu_mma_probe: error writing %s\n", report);
        return 2;
    }
    free(FA);
    free(FB);
    free(FC);
    free(FD);
    free(probe_f16);
    return def_ok && mul_bad == 0 && f16_tot == 0 && f16_probe_bad == 0 ? 0 : 1;
}
