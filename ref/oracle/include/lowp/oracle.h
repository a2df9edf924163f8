/* lowp/oracle.h: the slow MPFR model of the scalar codecs (the "slowfloat" of lowp).
 *
 * Written apart from ref/codec/src/format.c and sharing no code with it: values come from the
 * format definitions evaluated with MPFR, finite inputs are rounded by MPFR into each
 * format's precision and exponent range, and a code is found by matching the rounded value
 * against the values of all codes. Special values follow the tables of ref/profiles.md,
 * which this model holds as data. Use it to check lowp_encode_* / lowp_decode_*, never as
 * a fast path: one call costs 0.1-0.3 us, some hundred times the fast codecs.
 *
 * Thread safety: every call may run concurrently (MPFR must be built with thread-local
 * storage, as Debian's is). Each call sets MPFR's exponent range of the calling thread and
 * restores it before returning.
 */
#ifndef LOWP_ORACLE_H
#define LOWP_ORACLE_H

#include <stdint.h>

#include "lowp/format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Value of a code, computed exactly from the format definition with MPFR. NaN codes give a
 * quiet NaN with the code's sign bit (E8M0 0xFF: +NaN). Codes outside the format
 * (code >= 2^bits) and unknown formats give +NaN. */
double lowp_oracle_decode(lowp_format f, uint16_t code);

/* Whether the profile has this conversion, per the table "Supported combinations" of
 * ref/profiles.md: 1 yes, 0 no. saturate must be LOWP_SAT_OFF or LOWP_SAT_ON. */
int lowp_oracle_supported(lowp_format f, lowp_profile p, lowp_round r, int saturate);

/* The profile's default saturation for the format (LOWP_SAT_OFF or LOWP_SAT_ON), or -1
 * when the profile has no conversion to the format at all. */
int lowp_oracle_default_saturate(lowp_format f, lowp_profile p);

/* Encode x under (format, profile, rounding mode, saturate in {0, 1}) by MPFR rounding and
 * the special-value rules of ref/profiles.md. Returns 0 with *code set; -1 when the
 * combination is not supported (*code untouched); -2 if the model finds itself
 * inconsistent (a rounded value that no code has: a bug in this file). */
int lowp_oracle_encode_f32(lowp_format f, lowp_profile p, lowp_round r, int saturate,
                           float x, uint16_t *code);
int lowp_oracle_encode_f64(lowp_format f, lowp_profile p, lowp_round r, int saturate,
                           double x, uint16_t *code);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_ORACLE_H */
