/* tests/test_encode_e2m1.c: the quantize-on-write kernel's E2M1 encoder by integer
 * rounding (gpu/kernels/encode_e2m1.h), run on the CPU, on any machine, against lowp's
 * codec core with the settings the CPU writer's element codec resolves to.
 *
 *   test_encode_e2m1           every binary32 whose bits lie within 2^16 of a midpoint,
 *                              of 0.5..6 or of the special values, both signs, plus
 *                              every 4099th bit pattern and the codec (lowp_encode_f32
 *                              of lowp_codec_init(e2m1, cuda, rn, default saturation),
 *                              as ref/block/src/block.c's init_ctx sets it up) on a sample
 *   test_encode_e2m1 --full    all 2^32 binary32 inputs (OpenMP)
 *
 * The reference is lowp_encode_core_signed with (e2m1, cuda, rn, sat) as the kernel's
 * spec_e2m1_cuda spells it; the codec itself is checked to agree with that spelling, so a
 * wrong spec in the test cannot hide a wrong encoder. The H200 runs prove the kernel as a
 * whole against the CPU writer (gpu/check/kv_write_check.c). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include "encode_e2m1.h"
#include "lowp/bits.h"
#include "lowp/codec_core.h"
#include "lowp/format.h"
#include "lowp_test.h"

static int g_full;

/* The codec core as gpu/kernels/kv_write.cu's spec_e2m1_cuda calls it. */
static uint32_t ref(uint32_t b)
{
    return lowp_encode_core_signed(b, LOWP_RN, 1, 0, 0x7u, 0x8u, 0u, 0x7u, 0x7u, LOWP_NAN_FIXED,
                                   0x7u, 0x7u);
}

/* Mismatches over bits lo .. hi (inclusive; hi may be 2^32 - 1). */
static long check_range(uint64_t lo, uint64_t hi)
{
    long bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (int64_t i = (int64_t)lo; i <= (int64_t)hi; i++) {
        const uint32_t b = (uint32_t)i;
        bad += lowp_enc_e2m1_rn_sat(b) != ref(b);
    }
    return bad;
}

/* The bits of x within 2^16 of it, for x and -x. */
static long around(float x)
{
    long bad = 0;
    for (int s = 0; s < 2; s++) {
        const uint32_t c = lowp_f32_bits(x) | (uint32_t)s << 31;
        const uint64_t lo = c >= 65536u ? c - 65536u : 0u;
        const uint64_t hi = (uint64_t)c + 65536u > 0xffffffffu ? 0xffffffffu : c + 65536u;
        bad += check_range(lo, hi);
    }
    return bad;
}

START_TEST(named_values)
{
    /* the midpoints go to the even code, the values to themselves */
    static const struct {
        float x;
        uint32_t code;
    } t[] = {{0.0f, 0x0}, {-0.0f, 0x8}, {0.25f, 0x0}, {0.2500001f, 0x1}, {0.5f, 0x1},
             {0.75f, 0x2}, {0.7499999f, 0x1}, {1.25f, 0x2}, {1.2500001f, 0x3}, {1.75f, 0x4},
             {2.5f, 0x4}, {2.5000002f, 0x5}, {3.5f, 0x6}, {5.0f, 0x6}, {5.0000005f, 0x7},
             {6.0f, 0x7}, {1e30f, 0x7}, {-6.0f, 0xf}, {-0.5f, 0x9}, {-0.1f, 0x8},
             {0x1p-149f, 0x0}, {-0x1p-149f, 0x8}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        ck_assert_msg(lowp_enc_e2m1_rn_sat(lowp_f32_bits(t[i].x)) == t[i].code,
                      "%a gives 0x%x, want 0x%x", (double)t[i].x,
                      lowp_enc_e2m1_rn_sat(lowp_f32_bits(t[i].x)), t[i].code);
    ck_assert_uint_eq(lowp_enc_e2m1_rn_sat(0x7f800000u), 0x7u); /* +Inf saturates */
    ck_assert_uint_eq(lowp_enc_e2m1_rn_sat(0xff800000u), 0xfu); /* -Inf */
    ck_assert_uint_eq(lowp_enc_e2m1_rn_sat(0x7fc00000u), 0x7u); /* NaN, no sign */
    ck_assert_uint_eq(lowp_enc_e2m1_rn_sat(0xffc00001u), 0x7u);
}
END_TEST

START_TEST(reference_is_the_codec)
{
    /* the core's spelling above is what lowp_codec_init resolves for the CPU writer's
     * element codec: checked on every 251st pattern */
    lowp_codec c;
    ck_assert_int_eq(lowp_codec_init(&c, LOWP_E2M1, LOWP_PROFILE_CUDA, LOWP_RN, LOWP_SAT_DEFAULT, NULL, 0), 0);
    long bad = 0;
    for (uint64_t i = 0; i <= 0xffffffffu; i += 251)
        bad += lowp_encode_f32(&c, lowp_f32_from_bits((uint32_t)i)) != ref((uint32_t)i);
    ck_assert_msg(bad == 0, "%ld patterns: the test's reference differs from the codec", bad);
}
END_TEST

START_TEST(structured)
{
    long bad = 0;
    static const float pts[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f,
                                2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f, 0x1p-126f,
                                3.4028235e38f};
    for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
        bad += around(pts[i]);
    bad += around(lowp_f32_from_bits(0x7f800000u)); /* Inf and the NaNs next to it */
    bad += check_range(0xffff0000u, 0xffffffffu);   /* the last NaNs */
    for (uint64_t i = 0; i <= 0xffffffffu; i += 4099)
        bad += lowp_enc_e2m1_rn_sat((uint32_t)i) != ref((uint32_t)i);
    ck_assert_msg(bad == 0, "%ld inputs: the midpoint encoder differs from the codec core", bad);
}
END_TEST

START_TEST(every_input)
{
    const long bad = check_range(0, 0xffffffffu);
    ck_assert_msg(bad == 0, "%ld of 2^32 inputs: the midpoint encoder differs from the codec core",
                  bad);
}
END_TEST

int main(int argc, char **argv)
{
    g_full = lowp_test_tier("test_encode_e2m1", argc, argv);
    printf("test_encode_e2m1: %s\n", g_full ? "all 2^32 inputs" : "structured inputs");
    Suite *s = suite_create("encode_e2m1");
    lowp_test_tcase(s, "core", 60, LOWP_TESTS(named_values, reference_is_the_codec, structured));
    if (g_full)
        lowp_test_tcase(s, "full", 1200, LOWP_TESTS(every_input));
    return lowp_test_main(s, LOWP_TEST_FORK);
}
