/* tests/test_sm_clock.c: the bench's SM clock sampler (gpu/bench/sm_clock.h) where it cannot
 * sample: without NVML (CI machines have no driver), or for a device that does not
 * exist, open gives NULL, and every call on NULL reports no samples instead of crashing
 * `lowp gpu bench`. With a driver and a GPU, the H200 runs exercise the sampling itself
 * (reports/gpu-bench-h200.md, *The SM clock*). */
#include <check.h>
#include <math.h>

#include "sm_clock.h"
#include "lowp_test.h"

START_TEST(absent_device_gives_null)
{
    /* a PCI bus id that no machine has (domain ffff, bus ff) */
    lowp_sm_clock *c = lowp_sm_clock_open("FFFF:FF:1F.7");
    ck_assert_ptr_null(c);
    lowp_sm_clock_close(c);
}
END_TEST

START_TEST(null_reports_no_samples)
{
    lowp_sm_clock_stats s = {7, 1.0, 1.0, 1.0};
    ck_assert_int_eq(lowp_sm_clock_start(NULL), 0);
    lowp_sm_clock_stop(NULL, &s);
    ck_assert_int_eq(s.samples, 0);
    ck_assert(isnan(s.mean_mhz) && isnan(s.min_mhz) && isnan(s.limited));
    lowp_sm_clock_close(NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sm_clock");
    lowp_test_tcase(s, "no device", 0,
                    LOWP_TESTS(absent_device_gives_null, null_reports_no_samples));
    return lowp_test_main(s, LOWP_TEST_FORK);
}
