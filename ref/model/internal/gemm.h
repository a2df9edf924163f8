/* ref/model/internal/gemm.h: the forward pass's matrix products and softmax exponentials
 * (private to the model layer; tests reach it through the include directory they declare).
 *
 * Arithmetic, the same on every ISA and for any thread count: every output element is one
 * chain of fused multiply-adds over k ascending from +0,
 *     y = 0; for k = 0 .. K-1: y = fma(a[k], b[k], y)
 * so the AVX-512, AVX2 and scalar kernels agree bit for bit (tests/test_model.c checks it).
 *
 * B is packed in panels of LOWP_GEMM_NR = 32 columns: panel p holds, for k = 0 .. K-1, the
 * 32 values B[k][32p .. 32p+31] contiguously (columns past N are zero). A row-major weight
 * W[N][K] (a linear layer, y = x W^T) packs with lowp_gemm_pack_nk, a [K][N] matrix (V in
 * attention) with lowp_gemm_pack_kn. A is read in place: row pointers, unit stride in k. */
#ifndef LOWP_MODEL_GEMM_H
#define LOWP_MODEL_GEMM_H

#include <stddef.h>

#define LOWP_GEMM_NR 32
#define LOWP_GEMM_MR_MAX 8

/* c[i][j] = chain over k of a[i][k] * bp[k][j] for i < mr, j < nc (mr <= the kernel's
 * rows, nc <= 32); rows of c are ldc floats apart. a[i] for i >= mr is not read. */
typedef void (*lowp_gemm_kernel_fn)(size_t K, const float *const *a, const float *bp, float *c, size_t ldc,
                                    size_t mr, size_t nc);

/* Softmax's exponentials: s[j] = lowp exp of (s[j] - mx) for j < n, returning their sum in
 * binary64; requires s[j] <= mx or NaN (mx is the row's maximum, so x <= 0). The exp, the same bits on every ISA (tests/test_model.c checks it, and that it
 * is within 2 ulp of exp):
 *     x = s - mx; x < -87: 0 (exp(-87) = 1.6e-38: nothing a sum >= 1 can notice); NaN: NaN
 *     k = rint(x * log2(e));  r = fma(-k, ln2_hi, x);  r = fma(-k, ln2_lo, r)
 *     q = Horner over r of the Taylor coefficients 1/7!, 1/6!, ..., 1/1!, 1 (fma each)
 *     result = q * 2^k (k added to q's exponent field: q in [0.7, 1.5], k in [-126, 0])
 * (ln2_hi = 0.693359375 has 9 bits, so k * ln2_hi is exact; |r| <= 0.35 and the degree-7
 * remainder r^8/8! < 6e-9.) The sum: eight partial binary64 sums, partial j over the
 * elements j, j + 8, j + 16, ... in order, then ((p0 + p1) + (p2 + p3)) + ((p4 + p5) +
 * (p6 + p7)): the order a vector of 8 doubles gives, fixed for every ISA. */
typedef double (*lowp_softmax_exp_fn)(float *s, size_t n, float mx);

typedef struct lowp_gemm_isa {
    const char *name;      /* "avx512", "avx2", "scalar" */
    size_t mr;             /* rows per kernel call */
    lowp_gemm_kernel_fn kernel;
    lowp_softmax_exp_fn softmax_exp;
} lowp_gemm_isa;

/* The fastest kernel this CPU runs (chosen once), or one by name (NULL when the CPU lacks
 * it or the name is unknown). */
const lowp_gemm_isa *lowp_gemm_best(void);
const lowp_gemm_isa *lowp_gemm_isa_named(const char *name);

/* Floats a packed B of N columns and K rows takes: ceil(N / 32) * 32 * K. */
size_t lowp_gemm_packed_size(size_t N, size_t K);
/* Pack W[N][K] (row n, ldw floats apart) as B = W^T, or B[K][N] (row k, ldb apart). */
void lowp_gemm_pack_nk(size_t N, size_t K, const float *W, size_t ldw, float *bp);
void lowp_gemm_pack_kn(size_t K, size_t N, const float *B, size_t ldb, float *bp);

/* C[M][N] = A[M][K] * B (packed), C rows ldc apart, A rows lda apart; OpenMP over column
 * panels within row chunks. isa NULL: lowp_gemm_best(). */
void lowp_gemm(const lowp_gemm_isa *isa, size_t M, size_t N, size_t K, const float *A, size_t lda,
               const float *bp, float *C, size_t ldc);

#endif
