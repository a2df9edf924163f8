/* tests/test_decode_e2m1.c: the sm_90 decode kernels' E2M1 -> BF16 bit manipulation
 * (gpu/kernels/decode_e2m1.h), run on the CPU, on any machine.
 *
 * The kernel places each E2M1 code's bits into a BF16 that is 2^-126 times its value and
 * multiplies by 2^126 (MXFP4) or by the block scale times 2^119 (NVFP4, whose step 1
 * carries 2^-7); the H200 runs prove the kernel as a whole
 * (reports/gpu-decode-conform-h200.md). This test keeps that decode honest in CI, without
 * a GPU: every 16-bit pattern of codes in each half of the word against the emulator's
 * element values at scale 1.0 (lowp_gpu_decode_element_bf16, lowp/attn_gpu_emul.h step
 * 1), and MXFP4's E8M0 scale conversion on every code and scale byte. The host model of
 * prmt (which the kernels use to interleave V rows) is checked against results the PTX
 * ISA's definition fixes.
 */
#include <check.h>
#include <stdint.h>

#include "decode_e2m1.h"
#include "lowp/attn_gpu_emul.h"
#include "lowp_test.h"

#define E4M3_ONE 0x38 /* the E4M3 scale byte of 1.0 */

START_TEST(prmt_model)
{
    /* byte selection from {b, a}: a holds bytes 0..3 */
    ck_assert_uint_eq(lowp_dec_prmt(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
    ck_assert_uint_eq(lowp_dec_prmt(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
    ck_assert_uint_eq(lowp_dec_prmt(0x33221100u, 0x77665544u, 0x0415u), 0x00441155u);
    /* only the low 16 bits of the selector count */
    ck_assert_uint_eq(lowp_dec_prmt(0x33221100u, 0x77665544u, 0xFFFF3210u), 0x33221100u);
    /* bit 3 of a selector nibble replicates the selected byte's sign bit */
    ck_assert_uint_eq(lowp_dec_prmt(0x00000080u, 0u, 0x0008u), 0x808080FFu);
    ck_assert_uint_eq(lowp_dec_prmt(0x0000007Fu, 0x80000000u, 0xF008u), 0xFF7F7F00u);
}
END_TEST

/* The emulator's BF16 values of E2M1 code c (0..15) at block scale 1.0: NVFP4 (E4M3
 * 0x38; its step 1 carries 2^-7) and MXFP4 (E8M0 127: the code's value). */
static uint16_t want_nv(unsigned c)
{
    return lowp_gpu_decode_element_bf16(LOWP_NVFP4, (uint16_t)c, E4M3_ONE);
}
static uint16_t want_mx(unsigned c)
{
    return lowp_gpu_decode_element_bf16(LOWP_MXFP4, (uint16_t)c, 127);
}

/* The kernel's BF16 multiply of one half by the BF16 k, modelled in binary32 (BF16
 * subnormals are binary32 normals): the products checked here are exact whenever they
 * are the wanted values, so any result that is not one fails whatever the rounding. k:
 * the high half of LOWP_DEC_E2M1_UNBIAS (MXFP4) or of LOWP_DEC_NVFP4_SCALE_FIX (NVFP4,
 * block scale 1.0). */
static uint16_t mul(uint16_t h, uint32_t k)
{
    return lowp_bf16_from_f32(lowp_f32_from_bf16(h) * lowp_f32_from_bf16((uint16_t)(k >> 16)));
}

/* Check one word's four pairs (q_i, q_i+4) on both paths; returns the wrong halves. */
static int check_word(uint32_t w)
{
    uint32_t o[4];
    int bad = 0;
    lowp_dec_e2m1x8_sub(w, o);
    for (int i = 0; i < 4; i++) {
        const unsigned lo = (w >> (4 * i)) & 0xFu, hi = (w >> (4 * i + 16)) & 0xFu;
        const uint16_t a = (uint16_t)(o[i] & 0xFFFFu), b = (uint16_t)(o[i] >> 16);
        const uint32_t mx = LOWP_DEC_E2M1_UNBIAS, nv = LOWP_DEC_NVFP4_SCALE_FIX;
        bad += (mul(a, mx) != want_mx(lo)) + (mul(b, mx) != want_mx(hi));
        bad += (mul(a, nv) != want_nv(lo)) + (mul(b, nv) != want_nv(hi));
    }
    return bad;
}

START_TEST(placed_bits)
{
    /* the placement itself: code 1 (0.5) is the smallest BF16 subnormal x 2^6, code 7 (6)
     * is 2^-124 x 1.5; the sign goes to bit 15 of each half */
    uint32_t o[4];
    lowp_dec_e2m1x8_sub(0x00070001u, o);
    ck_assert_uint_eq(o[0], 0x01C00040u);
    lowp_dec_e2m1x8_sub(0x9000A000u, o); /* q3 = 0xA (-1), q7 = 0x9 (-0.5) */
    ck_assert_uint_eq(o[3], 0x80408080u);
    ck_assert_uint_eq(o[0] | o[1] | o[2], 0u);
    ck_assert_uint_eq(LOWP_DEC_E2M1_UNBIAS >> 16, 0x7E80u);     /* 2^126 */
    ck_assert_uint_eq(LOWP_DEC_NVFP4_SCALE_FIX >> 16, 0x7B00u); /* 2^119 */
}
END_TEST

START_TEST(every_code_pattern)
{
    /* every 16-bit pattern in the low half with a scrambled high half, and the reverse:
     * every code in every position, next to every code */
    long bad = 0;
    for (uint32_t x = 0; x < 65536; x++) {
        uint32_t y = (x * 0x9E37u + 0x1234u) & 0xFFFFu;
        bad += check_word(x | (y << 16));
        bad += check_word(y | (x << 16));
    }
    ck_assert_msg(bad == 0, "%ld BF16 halves differ from the emulator's element values", bad);
    /* the values themselves: +-0, +-0.5 and +-6 among them */
    ck_assert_uint_eq(want_mx(0x0), 0x0000);
    ck_assert_uint_eq(want_mx(0x8), 0x8000);
    ck_assert_uint_eq(want_mx(0x1), 0x3F00);
    ck_assert_uint_eq(want_mx(0xF), 0xC0C0);
    ck_assert_uint_eq(want_nv(0xF), 0xBD40); /* -6 x 2^-7 */
}
END_TEST

static int is_nan_bf16(uint16_t h)
{
    return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0;
}

START_TEST(mxfp4_every_code_and_scale)
{
    /* The kernel's MXFP4 element: the placed code, times 2^126, times the E8M0 scale as
     * BF16 (lowp_dec_e8m0_bf16), each a BF16 multiply, for all 16 codes x 256 scale
     * bytes: from 2^-128 x 0.5 (BF16 subnormals) through 6 x 2^127 (Inf) to the NaN
     * scale 0xFF. NaN is compared as NaN: the MMA turns any NaN operand into its
     * canonical NaN (lowp/mma.h). */
    ck_assert_uint_eq(lowp_dec_e8m0_bf16(127), 0x3F80u); /* 1.0 */
    ck_assert_uint_eq(lowp_dec_e8m0_bf16(0), 0x0040u);   /* 2^-127, subnormal */
    ck_assert_uint_eq(lowp_dec_e8m0_bf16(1), 0x0080u);   /* 2^-126 */
    ck_assert_uint_eq(lowp_dec_e8m0_bf16(254), 0x7F00u); /* 2^127 */
    ck_assert_uint_eq(lowp_dec_e8m0_bf16(255), 0x7FC0u); /* NaN */
    long bad = 0, nans = 0, infs = 0, subs = 0;
    for (unsigned c = 0; c < 256; c++) {
        for (unsigned q = 0; q < 16; q++) {
            uint32_t o[4];
            lowp_dec_e2m1x8_sub(q, o); /* code q in pair 0's low half */
            const uint16_t v = mul((uint16_t)(o[0] & 0xFFFFu), LOWP_DEC_E2M1_UNBIAS);
            const uint16_t got = mul(v, lowp_dec_e8m0_bf16((uint8_t)c) << 16);
            const uint16_t want = lowp_gpu_decode_element_bf16(LOWP_MXFP4, (uint16_t)q,
                                                               (uint8_t)c);
            if (is_nan_bf16(want) || is_nan_bf16(got)) {
                bad += !(is_nan_bf16(want) && is_nan_bf16(got));
                nans++;
                continue;
            }
            bad += got != want;
            infs += (want & 0x7FFFu) == 0x7F80u;
            subs += (want & 0x7F80u) == 0 && (want & 0x7Fu) != 0;
        }
    }
    ck_assert_msg(bad == 0, "%ld MXFP4 elements differ from the emulator's", bad);
    ck_assert_int_eq(nans, 16);            /* scale 0xFF */
    ck_assert_int_gt(infs, 0);             /* 6 x 2^127 and the like overflow in both */
    ck_assert_int_gt(subs, 0);             /* and small scales give BF16 subnormals */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("decode_e2m1");
    lowp_test_tcase(s, "core", 0,
                    LOWP_TESTS(prmt_model, placed_bits, every_code_pattern,
                               mxfp4_every_code_and_scale));
    return lowp_test_main(s, LOWP_TEST_FORK);
}
