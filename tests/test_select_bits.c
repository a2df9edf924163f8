/* tests/test_select_bits.c: the QSA scoring kernel's key decode by bit moves
 * (gpu/kernels/select_bits.h, used by qsa_score_v2_kernel), run on the CPU, on any machine.
 *
 * The kernel builds each BF16 / E4M3 key's double as k 2^-S (S = 896 / 1016) from the
 * code's bits and multiplies the query by 2^S, so a product is unchanged only if the moved
 * bits are exactly k 2^-S for every code it takes that way, and the Inf/NaN test finds
 * every code it must not take. This test checks both on every code, in every position of
 * the 32-bit word, beside every neighbour (BF16: every other half for one code in 257;
 * E4M3: every neighbour byte value), against lowp's decode (lowp_f32_from_bf16,
 * lowp_decode_f32) scaled by ldexp. The H200 runs prove the kernel as a whole against the
 * CPU selector model (reports/select-gpu-h200.md).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "lowp/bits.h"
#include "lowp/format.h"
#include "lowp_test.h"
#include "select_bits.h"

static int same(double a, uint32_t hi) /* bit for bit, the low word 0 */
{
    const uint64_t u = (uint64_t)hi << 32;
    uint64_t v;
    memcpy(&v, &a, sizeof v);
    return u == v;
}

START_TEST(bf16_every_code)
{
    long bad = 0, subs = 0, specials = 0;
    for (uint32_t c = 0; c < 65536; c++) {
        const float f = lowp_f32_from_bf16((uint16_t)c);
        const int sp = isnan(f) || isinf(f);
        specials += sp;
        subs += f != 0.0f && fabsf(f) < 0x1p-126f;
        for (uint32_t o = c % 257; o < 65536; o += 257) { /* the other half */
            const float g = lowp_f32_from_bf16((uint16_t)o);
            const int osp = isnan(g) || isinf(g);
            const uint32_t lo = c | o << 16, hi = o | c << 16;
            bad += (lowp_sel_bf16_special(lo) != 0) != (sp || osp);
            bad += (lowp_sel_bf16_special(hi) != 0) != (sp || osp);
            if (!sp) {
                const double want = ldexp((double)f, -896);
                bad += !same(want, lowp_sel_bf16_kx_hi(lo, 0)) + !same(want, lowp_sel_bf16_kx_hi(hi, 1));
            }
        }
    }
    ck_assert_msg(bad == 0, "%ld BF16 checks wrong", bad);
    ck_assert_int_eq(specials, 256); /* +-Inf and 254 NaNs */
    ck_assert_int_eq(subs, 2 * 127);     /* subnormals moved too, exactly */
}
END_TEST

START_TEST(e4m3_every_code)
{
    long bad = 0, nans = 0;
    for (uint32_t c = 0; c < 256; c++) {
        const float f = lowp_decode_f32(LOWP_E4M3, (uint16_t)c);
        const int sp = isnan(f);
        nans += sp;
        for (int e = 0; e < 4; e++)
            for (uint32_t nb = 0; nb < 256; nb++) { /* the other three bytes */
                const int osp = (nb & 0x7Fu) == 0x7Fu;
                const uint32_t w = (nb * 0x01010101u & ~(0xFFu << (8 * e))) | c << (8 * e);
                bad += (lowp_sel_e4m3_special(w) != 0) != (sp || osp);
                if (!sp)
                    bad += !same(ldexp((double)f, -1016), lowp_sel_e4m3_kx_hi(w, w << 1, e));
            }
    }
    ck_assert_msg(bad == 0, "%ld E4M3 checks wrong", bad);
    ck_assert_int_eq(nans, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select_bits");
    lowp_test_tcase(s, "core", 0, LOWP_TESTS(bf16_every_code, e4m3_every_code));
    return lowp_test_main(s, LOWP_TEST_FORK);
}
