/* ref/study/src/cases.c: structured binary32 case sets (see lowp/cases.h). */
#include "lowp/bits.h"
#include "lowp/cases.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint64_t lowp_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

typedef struct {
    float *v;
    size_t n, cap;
} case_buf;

static int push(case_buf *b, float x)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        float *nv = realloc(b->v, cap * sizeof *nv);
        if (nv == NULL)
            return -1;
        b->v = nv;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

/* x and its binary32 neighbours, both signs. */
static int push_with_neighbours(case_buf *b, double xd)
{
    float x = (float)xd;
    if ((double)x != xd || !isfinite(x))
        return 0; /* not a binary32 value: the caller's midpoint is beyond binary32 */
    float around[3] = {nextafterf(x, -INFINITY), x, nextafterf(x, INFINITY)};
    for (int i = 0; i < 3; i++)
        if (push(b, around[i]) || push(b, -around[i]))
            return -1;
    return 0;
}

size_t lowp_cases_f32(lowp_format f, uint64_t seed, unsigned per_exponent, size_t n_random,
                      float **out)
{
    case_buf b = {0};
    static const uint32_t specials[] = {
        0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, /* zeros, infinities */
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, /* quiet, signalling NaN */
        0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0xffbfffffu, 0x7fc00001u, 0x7f8fffffu,
        0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, /* binary32 subnormal extremes */
        0x00800000u, 0x80800000u, 0x7f7fffffu, 0xff7fffffu, /* min normal, max finite */
        0x00400000u, 0x00600000u, 0x00400001u, 0x005fffffu, /* 2^-127 and E8M0 ties below it */
    };
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++)
        if (push(&b, lowp_f32_from_bits(specials[i])))
            goto fail;

    /* Boundaries and ties: walk the positive finite codes in increasing value. Code
     * order equals value order for the positive half of every format here. */
    uint16_t maxc = lowp_format_max_code(f);
    double prev = -1.0;
    for (uint32_t c = 0; c <= maxc; c++) {
        double v = lowp_decode_f64(f, (uint16_t)c);
        if (push_with_neighbours(&b, v))
            goto fail;
        if (prev >= 0.0) {
            double mid = (f == LOWP_E8M0) ? 0.75 * v : 0.5 * (prev + v);
            if (push_with_neighbours(&b, mid))
                goto fail;
        }
        prev = v;
    }
    /* Beyond the largest finite value: the overflow threshold (half an ulp above max,
     * or 1.5 * max for E8M0) and the next power of two. */
    {
        double maxv = lowp_decode_f64(f, maxc);
        double below = lowp_decode_f64(f, (uint16_t)(maxc - 1));
        double thr = (f == LOWP_E8M0) ? 1.5 * maxv : maxv + 0.5 * (maxv - below);
        if (push_with_neighbours(&b, thr) || push_with_neighbours(&b, 2.0 * maxv))
            goto fail;
        /* Underflow: half the smallest positive value (E8M0: below 2^-127). */
        double minv = lowp_decode_f64(f, (uint16_t)(f == LOWP_E8M0 ? 0 : 1));
        if (push_with_neighbours(&b, 0.5 * minv) || push_with_neighbours(&b, 0.25 * minv))
            goto fail;
    }

    uint64_t st = seed;
    for (uint32_t e = 0; e < 255; e++)
        for (uint32_t s = 0; s < 2; s++)
            for (unsigned k = 0; k < per_exponent; k++) {
                uint32_t m = (uint32_t)lowp_splitmix64(&st) & 0x7fffffu;
                if (push(&b, lowp_f32_from_bits((s << 31) | (e << 23) | m)))
                    goto fail;
            }
    for (size_t k = 0; k < n_random; k++)
        if (push(&b, lowp_f32_from_bits((uint32_t)lowp_splitmix64(&st))))
            goto fail;
    *out = b.v;
    return b.n;
fail:
    free(b.v);
    *out = NULL;
    return 0;
}
