/* ref/model/src/gemm.c: packed matrix products for the forward pass (ref/model/internal/
 * gemm.h states the arithmetic: one FMA chain per output over k ascending, on every ISA).
 *
 * Kernels (rows x 32 columns of C per call, K whole, so C is written once):
 *   avx512  8 rows: 16 zmm accumulators, two B vectors and a broadcast per k
 *   avx2    3 rows: 12 ymm accumulators, one B vector at a time, three broadcasts per k
 *   scalar  4 rows: fmaf, for CPUs with neither (and as the tests' reference order)
 * The vector kernels are compiled for their ISA with target attributes and chosen at run
 * time (__builtin_cpu_supports), so the library runs on any x86-64.
 * Blocking: lowp_gemm takes CHUNK rows of A at a time (512 x K floats: 1.2 MB for K = 576,
 * within a 2 MB L2) and every 32-column panel of B (the thread's share of them) against
 * those rows: a panel (K x 32 floats, 72 KB for K = 576) is reused by all the rows' kernel
 * calls. */
#include "gemm.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <omp.h>
#include <string.h>

#define CHUNK 512

size_t lowp_gemm_packed_size(size_t N, size_t K)
{
    return (N + LOWP_GEMM_NR - 1) / LOWP_GEMM_NR * LOWP_GEMM_NR * K;
}

void lowp_gemm_pack_nk(size_t N, size_t K, const float *W, size_t ldw, float *bp)
{
    size_t np = (N + LOWP_GEMM_NR - 1) / LOWP_GEMM_NR;
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < np; p++) {
        float *dst = bp + p * LOWP_GEMM_NR * K;
        for (size_t j = 0; j < LOWP_GEMM_NR; j++) {
            size_t n = p * LOWP_GEMM_NR + j;
            for (size_t k = 0; k < K; k++)
                dst[k * LOWP_GEMM_NR + j] = n < N ? W[n * ldw + k] : 0.0f;
        }
    }
}

void lowp_gemm_pack_kn(size_t K, size_t N, const float *B, size_t ldb, float *bp)
{
    size_t np = (N + LOWP_GEMM_NR - 1) / LOWP_GEMM_NR;
    for (size_t p = 0; p < np; p++) {
        float *dst = bp + p * LOWP_GEMM_NR * K;
        size_t nc = N - p * LOWP_GEMM_NR < LOWP_GEMM_NR ? N - p * LOWP_GEMM_NR : LOWP_GEMM_NR;
        for (size_t k = 0; k < K; k++) {
            memcpy(dst + k * LOWP_GEMM_NR, B + k * ldb + p * LOWP_GEMM_NR, nc * sizeof(float));
            for (size_t j = nc; j < LOWP_GEMM_NR; j++)
                dst[k * LOWP_GEMM_NR + j] = 0.0f;
        }
    }
}

static void kern_scalar(size_t K, const float *const *a, const float *bp, float *c, size_t ldc, size_t mr,
                        size_t nc)
{
    float acc[4][LOWP_GEMM_NR] = {{0}};
    for (size_t k = 0; k < K; k++) {
        const float *b = bp + k * LOWP_GEMM_NR;
        for (size_t i = 0; i < mr; i++) {
            float ai = a[i][k];
            for (size_t j = 0; j < LOWP_GEMM_NR; j++)
                acc[i][j] = fmaf(ai, b[j], acc[i][j]);
        }
    }
    for (size_t i = 0; i < mr; i++)
        memcpy(c + i * ldc, acc[i], nc * sizeof(float));
}

__attribute__((target("avx2,fma"))) static void kern_avx2(size_t K, const float *const *a, const float *bp,
                                                           float *c, size_t ldc, size_t mr, size_t nc)
{
    const float *a0 = a[0], *a1 = mr > 1 ? a[1] : a[0], *a2 = mr > 2 ? a[2] : a[0];
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00;
    __m256 c10 = c00, c11 = c00, c12 = c00, c13 = c00, c20 = c00, c21 = c00, c22 = c00, c23 = c00;
    for (size_t k = 0; k < K; k++) {
        const float *b = bp + k * LOWP_GEMM_NR;
        __m256 x0 = _mm256_broadcast_ss(a0 + k), x1 = _mm256_broadcast_ss(a1 + k), x2 = _mm256_broadcast_ss(a2 + k);
        __m256 b0 = _mm256_loadu_ps(b);
        c00 = _mm256_fmadd_ps(x0, b0, c00); c10 = _mm256_fmadd_ps(x1, b0, c10); c20 = _mm256_fmadd_ps(x2, b0, c20);
        __m256 b1 = _mm256_loadu_ps(b + 8);
        c01 = _mm256_fmadd_ps(x0, b1, c01); c11 = _mm256_fmadd_ps(x1, b1, c11); c21 = _mm256_fmadd_ps(x2, b1, c21);
        __m256 b2 = _mm256_loadu_ps(b + 16);
        c02 = _mm256_fmadd_ps(x0, b2, c02); c12 = _mm256_fmadd_ps(x1, b2, c12); c22 = _mm256_fmadd_ps(x2, b2, c22);
        __m256 b3 = _mm256_loadu_ps(b + 24);
        c03 = _mm256_fmadd_ps(x0, b3, c03); c13 = _mm256_fmadd_ps(x1, b3, c13); c23 = _mm256_fmadd_ps(x2, b3, c23);
    }
    float t[3][LOWP_GEMM_NR];
    _mm256_storeu_ps(t[0], c00); _mm256_storeu_ps(t[0] + 8, c01); _mm256_storeu_ps(t[0] + 16, c02);
    _mm256_storeu_ps(t[0] + 24, c03);
    _mm256_storeu_ps(t[1], c10); _mm256_storeu_ps(t[1] + 8, c11); _mm256_storeu_ps(t[1] + 16, c12);
    _mm256_storeu_ps(t[1] + 24, c13);
    _mm256_storeu_ps(t[2], c20); _mm256_storeu_ps(t[2] + 8, c21); _mm256_storeu_ps(t[2] + 16, c22);
    _mm256_storeu_ps(t[2] + 24, c23);
    for (size_t i = 0; i < mr; i++)
        memcpy(c + i * ldc, t[i], nc * sizeof(float));
}

__attribute__((target("avx512f"))) static void kern_avx512(size_t K, const float *const *a, const float *bp,
                                                            float *c, size_t ldc, size_t mr, size_t nc)
{
    const float *r[8];
    for (size_t i = 0; i < 8; i++)
        r[i] = i < mr ? a[i] : a[0];
    __m512 acc[8][2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    for (size_t k = 0; k < K; k++) {
        const float *b = bp + k * LOWP_GEMM_NR;
        __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) {
            __m512 x = _mm512_set1_ps(r[i][k]);
            acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
        }
    }
    __mmask16 m0 = (__mmask16)(nc >= 16 ? 0xffffu : (1u << nc) - 1u);
    __mmask16 m1 = (__mmask16)(nc >= 32 ? 0xffffu : nc <= 16 ? 0u : (1u << (nc - 16)) - 1u);
    for (size_t i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, acc[i][0]);
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, acc[i][1]);
    }
}


/* ---- softmax's exponentials (gemm.h states the definition) ---- */

#define EXP_LOG2E 0x1.715476p+0f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO -2.12194440e-4f
#define EXP_MIN -87.0f
static const float exp_c[8] = {1.0f / 5040.0f, 1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f,
                               1.0f, 1.0f}; /* 1/7! .. 1/1!, 1: Horner from the first */

static float exp_one(float x)
{
    if (x != x)
        return x;
    if (x < EXP_MIN)
        return 0.0f;
    float k = nearbyintf(x * EXP_LOG2E);
    float r = fmaf(-k, EXP_LN2_HI, x);
    r = fmaf(-k, EXP_LN2_LO, r);
    float q = exp_c[0];
    for (int i = 1; i < 8; i++)
        q = fmaf(q, r, exp_c[i]);
    uint32_t b;
    memcpy(&b, &q, 4);
    b += (uint32_t)(int32_t)k << 23;
    memcpy(&q, &b, 4);
    return q;
}

static double sum8(const double p[8])
{
    return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

/* Elements from j on, scalar, continuing the partial sums part[] (element i in part[i % 8]). */
static void exp_tail(float *s, size_t j, size_t n, float mx, double part[8])
{
    for (; j < n; j++) {
        s[j] = exp_one(s[j] - mx);
        part[j % 8] += (double)s[j];
    }
}

static double softmax_exp_scalar(float *s, size_t n, float mx)
{
    double part[8] = {0};
    exp_tail(s, 0, n, mx, part);
    return sum8(part);
}

__attribute__((target("avx2,fma"))) static double softmax_exp_avx2(float *s, size_t n, float mx)
{
    __m256 vmx = _mm256_set1_ps(mx), l2e = _mm256_set1_ps(EXP_LOG2E), hi = _mm256_set1_ps(EXP_LN2_HI),
           lo = _mm256_set1_ps(EXP_LN2_LO), vmin = _mm256_set1_ps(EXP_MIN);
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_sub_ps(_mm256_loadu_ps(s + j), vmx);
        __m256 k = _mm256_round_ps(_mm256_mul_ps(x, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256 r = _mm256_fnmadd_ps(k, hi, x);
        r = _mm256_fnmadd_ps(k, lo, r);
        __m256 q = _mm256_set1_ps(exp_c[0]);
        for (int i = 1; i < 8; i++)
            q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(exp_c[i]));
        __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(k), 23);
        __m256 y = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(q), e));
        y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, vmin, _CMP_LT_OQ));
        y = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
        _mm256_storeu_ps(s + j, y);
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(y)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1)));
    }
    double part[8];
    _mm256_storeu_pd(part, a0);
    _mm256_storeu_pd(part + 4, a1);
    exp_tail(s, j, n, mx, part);
    return sum8(part);
}

__attribute__((target("avx512f"))) static double softmax_exp_avx512(float *s, size_t n, float mx)
{
    __m512 vmx = _mm512_set1_ps(mx), l2e = _mm512_set1_ps(EXP_LOG2E), hi = _mm512_set1_ps(EXP_LN2_HI),
           lo = _mm512_set1_ps(EXP_LN2_LO), vmin = _mm512_set1_ps(EXP_MIN);
    __m512d acc = _mm512_setzero_pd();
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512 x = _mm512_sub_ps(_mm512_loadu_ps(s + j), vmx);
        __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, l2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m512 r = _mm512_fnmadd_ps(k, hi, x);
        r = _mm512_fnmadd_ps(k, lo, r);
        __m512 q = _mm512_set1_ps(exp_c[0]);
        for (int i = 1; i < 8; i++)
            q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(exp_c[i]));
        __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(k), 23);
        __m512 y = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(q), e));
        y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, vmin, _CMP_LT_OQ), y, _mm512_setzero_ps());
        y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
        _mm512_storeu_ps(s + j, y);
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(y)));
        acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(y), 1))));
    }
    double part[8];
    _mm512_storeu_pd(part, acc);
    exp_tail(s, j, n, mx, part);
    return sum8(part);
}

static const lowp_gemm_isa isas[] = {
    {"avx512", 8, kern_avx512, softmax_exp_avx512},
    {"avx2", 3, kern_avx2, softmax_exp_avx2},
    {"scalar", 4, kern_scalar, softmax_exp_scalar},
};

static int supported(const lowp_gemm_isa *isa)
{
    if (isa->kernel == kern_avx512)
        return __builtin_cpu_supports("avx512f");
    if (isa->kernel == kern_avx2)
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return 1;
}

const lowp_gemm_isa *lowp_gemm_isa_named(const char *name)
{
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; i++)
        if (strcmp(isas[i].name, name) == 0)
            return supported(&isas[i]) ? &isas[i] : NULL;
    return NULL;
}

const lowp_gemm_isa *lowp_gemm_best(void)
{
    static const lowp_gemm_isa *best; /* a benign race: every thread computes the same */
    if (best == NULL) {
        size_t i = 0;
        while (!supported(&isas[i]))
            i++;
        best = &isas[i];
    }
    return best;
}

void lowp_gemm(const lowp_gemm_isa *isa, size_t M, size_t N, size_t K, const float *A, size_t lda,
               const float *bp, float *C, size_t ldc)
{
    if (isa == NULL)
        isa = lowp_gemm_best();
    size_t np = (N + LOWP_GEMM_NR - 1) / LOWP_GEMM_NR, mr = isa->mr;
    /* One parallel region, each thread a fixed range of column panels for every row chunk:
     * the threads meet once, at the end (on a shared, oversubscribed machine every
     * barrier can cost a scheduler time slice). */
#pragma omp parallel
    {
        size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        size_t p0 = np * id / nt, p1 = np * (id + 1) / nt;
        for (size_t m0 = 0; m0 < M; m0 += CHUNK) {
            size_t m1 = M - m0 < CHUNK ? M : m0 + CHUNK;
            for (size_t p = p0; p < p1; p++) {
                const float *b = bp + p * LOWP_GEMM_NR * K;
                size_t nc = N - p * LOWP_GEMM_NR < LOWP_GEMM_NR ? N - p * LOWP_GEMM_NR : LOWP_GEMM_NR;
                for (size_t m = m0; m < m1; m += mr) {
                    const float *rows[LOWP_GEMM_MR_MAX];
                    size_t r = m1 - m < mr ? m1 - m : mr;
                    for (size_t i = 0; i < r; i++)
                        rows[i] = A + (m + i) * lda;
                    isa->kernel(K, rows, b, C + m * ldc + p * LOWP_GEMM_NR, ldc, r, nc);
                }
            }
        }
    }
}
