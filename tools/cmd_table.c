/* tools/cmd_table.c: `lowp table FORMAT`: every code of a format with its fields and
 * exact value. The value column is exact: %a is the binary value, %.9g round-trips. */
#include <math.h>
#include <string.h>

#include "cli.h"
#include "lowp/format.h"

LOWP_COMMAND_DEFINE(table, "print every code of a format and its value");

static const char *code_class(lowp_format f, uint16_t code)
{
    if (lowp_code_is_nan(f, code))
        return "nan";
    if (lowp_code_is_inf(f, code))
        return "inf";
    double v = lowp_decode_f64(f, code);
    uint16_t mag = f == LOWP_E8M0 ? code : (uint16_t)(code & ((1u << (lowp_format_bits(f) - 1)) - 1u));
    if (v == 0)
        return "zero";
    if (mag == lowp_format_max_code(f))
        return "max";
    if (f != LOWP_E8M0 && (mag >> lowp_format_mantissa_bits(f)) == 0)
        return "subnormal";
    return "normal";
}

int lowp_cmd_table(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        puts("usage: lowp table FORMAT   (e2m1 e4m3 e5m2 e8m0 bf16 f16)\n"
             "prints: code, sign, exponent field, fraction field, value (%.9g and %a), class");
        return LOWP_EXIT_OK;
    }
    if (argc != 2)
        lowp_cli_fail("table: expected exactly one FORMAT (e2m1 e4m3 e5m2 e8m0 bf16 f16)");
    lowp_format f;
    if (lowp_format_parse(argv[1], &f))
        lowp_cli_fail("unknown format '%s' (e2m1 e4m3 e5m2 e8m0 bf16 f16)", argv[1]);
    int mb = lowp_format_mantissa_bits(f), eb = lowp_format_exponent_bits(f);
    int digits = (int)lowp_format_bits(f) / 4;
    printf("# %s: %d exponent bits, %d fraction bits, bias %d\n", argv[1], eb, mb, lowp_format_bias(f));
    printf("# code sign exponent fraction value hex-value class\n");
    for (uint32_t c = 0; c < lowp_format_code_count(f); c++) {
        unsigned sign = f == LOWP_E8M0 ? 0 : (c >> (eb + mb)) & 1u;
        unsigned ex = (c >> mb) & ((1u << eb) - 1u);
        unsigned fr = c & ((1u << mb) - 1u);
        double v = lowp_decode_f64(f, (uint16_t)c);
        printf("0x%0*x %u %u %u %.9g %a %s\n", digits, c, sign, ex, fr, v, v, code_class(f, (uint16_t)c));
    }
    if (fflush(stdout) != 0)
        lowp_cli_fail("cannot write to standard output");
    return LOWP_EXIT_OK;
}
