/* ref/codec/src/format_array.c: array encoders. One loop per (format, mode) with both
 * constant, so the branch-free encoder in format_internal.h vectorizes (variable
 * per-lane shifts need AVX2; the default clone keeps baseline x86-64 working).
 * Large arrays are split into fixed chunks across OpenMP threads: every element's code
 * depends only on that element, so the result is the same for any thread count. */
#include <stddef.h>

#include "format_internal.h"

/* x86-64: the same loops compiled three times (AVX-512, AVX2, baseline) and chosen once
 * by CPUID; the encoder's per-lane variable shifts only vectorize from AVX2 on. */
#if defined(__x86_64__) && defined(__GNUC__)
#define LOWP_X86_DISPATCH 1
#endif

#define LOWP_PARALLEL_MIN ((size_t)1 << 18) /* below this, threads cost more than they save */
#define LOWP_CHUNK ((size_t)1 << 16)

/* One small function per (ISA, format, mode, output width): gcc 12 vectorizes each of
 * them on its own, but gives up on most loops when 25 of them share one function. */
#define KERNEL(NAME, ATTR, OUT_T, EXPR)                                                            \
    ATTR static void NAME(const lowp_codec *restrict codec, const float *restrict in,             \
                          OUT_T *restrict out, size_t n)                                           \
    {                                                                                              \
        /* A local copy: byte stores may alias anything and would otherwise force the          \
         * policy fields to be reloaded per element, which blocks vectorization. */             \
        const lowp_codec local = *codec, *c = &local;                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            out[i] = (OUT_T)(EXPR);                                                                \
    }

#define SIGNED_MODE(ISA, ATTR, FMT, MB, EMIN, MODE)                                                \
    KERNEL(k_##ISA##_##FMT##_##MODE##_u8, ATTR, uint8_t,                                           \
           lowp_encode_bits_signed(c, lowp_f32_bits(in[i]), LOWP_##MODE, MB, EMIN))                \
    KERNEL(k_##ISA##_##FMT##_##MODE##_u16, ATTR, uint16_t,                                         \
           lowp_encode_bits_signed(c, lowp_f32_bits(in[i]), LOWP_##MODE, MB, EMIN))

#define SIGNED_FORMAT(ISA, ATTR, FMT, MB, EMIN)                                                    \
    SIGNED_MODE(ISA, ATTR, FMT, MB, EMIN, RN)                                                      \
    SIGNED_MODE(ISA, ATTR, FMT, MB, EMIN, RZ)                                                      \
    SIGNED_MODE(ISA, ATTR, FMT, MB, EMIN, RU)                                                      \
    SIGNED_MODE(ISA, ATTR, FMT, MB, EMIN, RD)                                                      \
    SIGNED_MODE(ISA, ATTR, FMT, MB, EMIN, RNA)

/* E8M0: rn and rna are the same rule, rd is rz (magnitude down). */
#define E8M0_MODE(ISA, ATTR, MODE)                                                                 \
    KERNEL(k_##ISA##_E8M0_##MODE##_u8, ATTR, uint8_t,                                              \
           lowp_encode_bits_e8m0(c, lowp_f32_bits(in[i]), LOWP_##MODE))                            \
    KERNEL(k_##ISA##_E8M0_##MODE##_u16, ATTR, uint16_t,                                            \
           lowp_encode_bits_e8m0(c, lowp_f32_bits(in[i]), LOWP_##MODE))

#define ALL_KERNELS(ISA, ATTR)                                                                     \
    SIGNED_FORMAT(ISA, ATTR, E2M1, 1, 0)                                                           \
    SIGNED_FORMAT(ISA, ATTR, E4M3, 3, -6)                                                          \
    SIGNED_FORMAT(ISA, ATTR, E5M2, 2, -14)                                                         \
    SIGNED_FORMAT(ISA, ATTR, BF16, 7, -126)                                                        \
    SIGNED_FORMAT(ISA, ATTR, F16, 10, -14)                                                         \
    E8M0_MODE(ISA, ATTR, RN)                                                                       \
    E8M0_MODE(ISA, ATTR, RU)                                                                       \
    E8M0_MODE(ISA, ATTR, RZ)

typedef void (*chunk_u8_fn)(const lowp_codec *, const float *, uint8_t *, size_t);
typedef void (*chunk_u16_fn)(const lowp_codec *, const float *, uint16_t *, size_t);

/* [format][mode] table of one ISA's kernels, in lowp_format / lowp_round order. */
#define ROW(ISA, FMT, W) {k_##ISA##_##FMT##_RN_##W, k_##ISA##_##FMT##_RZ_##W, k_##ISA##_##FMT##_RU_##W, \
                          k_##ISA##_##FMT##_RD_##W, k_##ISA##_##FMT##_RNA_##W}
#define E8M0_ROW(ISA, W) {k_##ISA##_E8M0_RN_##W, k_##ISA##_E8M0_RZ_##W, k_##ISA##_E8M0_RU_##W,       \
                          k_##ISA##_E8M0_RZ_##W, k_##ISA##_E8M0_RN_##W}
#define TABLE(ISA, W)                                                                              \
    {ROW(ISA, E2M1, W), ROW(ISA, E4M3, W), ROW(ISA, E5M2, W), E8M0_ROW(ISA, W), ROW(ISA, BF16, W), \
     ROW(ISA, F16, W)}

ALL_KERNELS(base, )
#ifdef LOWP_X86_DISPATCH
ALL_KERNELS(avx2, __attribute__((target("avx2"))))
ALL_KERNELS(avx512, __attribute__((target("avx512f,avx512bw,avx512vl"))))
static const chunk_u8_fn kernels_u8[3][LOWP_FORMAT_COUNT][LOWP_ROUND_COUNT] = {
    TABLE(base, u8), TABLE(avx2, u8), TABLE(avx512, u8)};
static const chunk_u16_fn kernels_u16[3][LOWP_FORMAT_COUNT][LOWP_ROUND_COUNT] = {
    TABLE(base, u16), TABLE(avx2, u16), TABLE(avx512, u16)};
#else
static const chunk_u8_fn kernels_u8[1][LOWP_FORMAT_COUNT][LOWP_ROUND_COUNT] = {TABLE(base, u8)};
static const chunk_u16_fn kernels_u16[1][LOWP_FORMAT_COUNT][LOWP_ROUND_COUNT] = {TABLE(base, u16)};
#endif

static int isa_level(void)
{
#ifdef LOWP_X86_DISPATCH
    /* Every thread computes the same value, so a relaxed atomic cache is enough. */
    static int cached = -1;
    int level = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (level < 0) {
        __builtin_cpu_init();
        level = (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl"))
                    ? 2
                    : __builtin_cpu_supports("avx2") ? 1 : 0;
        __atomic_store_n(&cached, level, __ATOMIC_RELAXED);
    }
    return level;
#else
    return 0;
#endif
}

const char *lowp_encode_isa(void)
{
    static const char *const names[] = {"baseline", "avx2", "avx512"};
    return names[isa_level()];
}

static void encode_chunk_u8(const lowp_codec *c, const float *in, uint8_t *out, size_t n)
{
    kernels_u8[isa_level()][c->format][c->round](c, in, out, n);
}

static void encode_chunk_u16(const lowp_codec *c, const float *in, uint16_t *out, size_t n)
{
    kernels_u16[isa_level()][c->format][c->round](c, in, out, n);
}

void lowp_encode_f32_u8(const lowp_codec *c, const float *in, uint8_t *out, size_t n)
{
    if (n < LOWP_PARALLEL_MIN) {
        encode_chunk_u8(c, in, out, n);
        return;
    }
    long nchunks = (long)((n + LOWP_CHUNK - 1) / LOWP_CHUNK);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < nchunks; k++) {
        size_t lo = (size_t)k * LOWP_CHUNK;
        size_t len = n - lo < LOWP_CHUNK ? n - lo : LOWP_CHUNK;
        encode_chunk_u8(c, in + lo, out + lo, len);
    }
}

void lowp_encode_f32_u16(const lowp_codec *c, const float *in, uint16_t *out, size_t n)
{
    if (n < LOWP_PARALLEL_MIN) {
        encode_chunk_u16(c, in, out, n);
        return;
    }
    long nchunks = (long)((n + LOWP_CHUNK - 1) / LOWP_CHUNK);
#pragma omp parallel for schedule(static)
    for (long k = 0; k < nchunks; k++) {
        size_t lo = (size_t)k * LOWP_CHUNK;
        size_t len = n - lo < LOWP_CHUNK ? n - lo : LOWP_CHUNK;
        encode_chunk_u16(c, in + lo, out + lo, len);
    }
}
