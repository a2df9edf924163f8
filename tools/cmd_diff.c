/* tools/cmd_diff.c: `lowp diff FORMAT`: where the profiles disagree.
 *
 * Columns are the implementations' own configurations of the format: each profile at
 * round-to-nearest (or, where it has none, each mode it has) and each overflow policy it
 * offers (for ocp: both policies for E4M3/E5M2, the spec's default elsewhere). Every input of the built-in case set (lowp_cases_f32: specials, every tie and
 * boundary with neighbours, random values) is encoded by every column; inputs on which
 * the columns do not all agree are grouped by (input class, agreement pattern), and each
 * group is printed once with its count and its first input as the example. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/cases.h"
#include "lowp/format.h"

LOWP_COMMAND_DEFINE(diff, "show where the profiles (implementations) disagree on a format");

#define MAX_COLS 16
#define MAX_GROUPS 256

typedef struct {
    lowp_codec codec;
    char name[32];
} column;

typedef struct {
    char cls[16];
    unsigned char pattern[MAX_COLS]; /* column i has the same code as column pattern[i] */
    size_t count;
    float example;
    uint16_t codes[MAX_COLS];
} group;

static const char *input_class(lowp_format f, float x)
{
    if (isnan(x))
        return signbit(x) ? "-nan" : "+nan";
    if (isinf(x))
        return signbit(x) ? "-inf" : "+inf";
    if (x == 0)
        return signbit(x) ? "-0" : "+0";
    double a = fabs((double)x);
    double maxv = lowp_decode_f64(f, lowp_format_max_code(f));
    double minv = lowp_decode_f64(f, (uint16_t)(f == LOWP_E8M0 ? 0 : 1));
    int neg = signbit(x) != 0;
    if (a > maxv)
        return neg ? "-overflow" : "+overflow";
    if (a < minv)
        return neg ? "-underflow" : "+underflow";
    if (f != LOWP_E8M0) {
        double minnorm = lowp_decode_f64(f, (uint16_t)(1u << lowp_format_mantissa_bits(f)));
        if (a < minnorm)
            return neg ? "-subnormal" : "+subnormal";
    }
    return neg ? "-normal" : "+normal";
}

static int build_columns(lowp_format f, column *cols)
{
    int n = 0;
    for (int p = 0; p < LOWP_PROFILE_COUNT; p++) {
        lowp_codec probe;
        int has_rn = 0;
        for (int s = 0; s < 2; s++)
            has_rn |= lowp_codec_init(&probe, f, (lowp_profile)p, LOWP_RN, s, NULL, 0) == 0;
        for (int r = 0; r < LOWP_ROUND_COUNT; r++) {
            if (has_rn ? r != LOWP_RN : (r == LOWP_RD || r == LOWP_RNA))
                continue;
            for (int s = 1; s >= 0; s--) {
                /* The OCP 8-bit spec defines both overflow policies for E4M3/E5M2 only;
                 * lowp's other ocp saturation options are extensions, left out here. */
                int fp8 = f == LOWP_E4M3 || f == LOWP_E5M2;
                if (p == LOWP_PROFILE_OCP && !fp8 && s != (f == LOWP_E2M1 || f == LOWP_E8M0))
                    continue;
                if (n == MAX_COLS || lowp_codec_init(&cols[n].codec, f, (lowp_profile)p, (lowp_round)r, s, NULL, 0))
                    continue;
                snprintf(cols[n].name, sizeof cols[n].name, "%s %s%s", lowp_profile_name((lowp_profile)p),
                         lowp_round_name((lowp_round)r), s ? " sat" : "");
                n++;
            }
        }
    }
    return n;
}

int lowp_cmd_diff(int argc, char **argv)
{
    const char *fname = NULL;
    uint64_t seed = LOWP_DEFAULT_SEED;
    size_t nrandom = 100000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seed") == 0)
            seed = lowp_cli_parse_seed("--seed", lowp_cli_option_value(argc, argv, &i));
        else if (strcmp(argv[i], "--random") == 0)
            /* at most 2^28 random inputs (1 GiB of binary32 held at once) */
            nrandom = (size_t)lowp_cli_parse_u64("--random", lowp_cli_option_value(argc, argv, &i), 0,
                                                 (uint64_t)1 << 28);
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            puts("usage: lowp diff FORMAT [--seed S] [--random N]\n"
                 "prints a Markdown table of the input classes on which the profiles disagree");
            return LOWP_EXIT_OK;
        } else if (argv[i][0] == '-' || fname != NULL)
            lowp_cli_fail("diff: unexpected argument '%s' (see lowp diff --help)", argv[i]);
        else
            fname = argv[i];
    }
    lowp_format f;
    if (fname == NULL)
        lowp_cli_fail("diff: expected a FORMAT (e2m1 e4m3 e5m2 e8m0 bf16 f16)");
    if (lowp_format_parse(fname, &f))
        lowp_cli_fail("unknown format '%s' (e2m1 e4m3 e5m2 e8m0 bf16 f16)", fname);

    column cols[MAX_COLS];
    int ncol = build_columns(f, cols);
    float *x;
    size_t n = lowp_cases_f32(f, seed, 16, nrandom, &x);
    if (n == 0)
        lowp_cli_fail("out of memory building the case set");
    static group groups[MAX_GROUPS];
    int ngroups = 0;
    size_t disagree = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t codes[MAX_COLS];
        unsigned char pattern[MAX_COLS];
        int all_same = 1;
        for (int k = 0; k < ncol; k++) {
            codes[k] = lowp_encode_f32(&cols[k].codec, x[i]);
            pattern[k] = (unsigned char)k;
            for (int j = 0; j < k; j++)
                if (codes[j] == codes[k]) {
                    pattern[k] = (unsigned char)j;
                    break;
                }
            all_same &= codes[k] == codes[0];
        }
        if (all_same)
            continue;
        disagree++;
        const char *cls = input_class(f, x[i]);
        int g;
        for (g = 0; g < ngroups; g++)
            if (strcmp(groups[g].cls, cls) == 0 && memcmp(groups[g].pattern, pattern, (size_t)ncol) == 0)
                break;
        if (g == ngroups) {
            if (ngroups == MAX_GROUPS)
                continue;
            snprintf(groups[g].cls, sizeof groups[g].cls, "%s", cls);
            memcpy(groups[g].pattern, pattern, (size_t)ncol);
            memcpy(groups[g].codes, codes, sizeof codes);
            groups[g].example = x[i];
            groups[g].count = 0;
            ngroups++;
        }
        groups[g].count++;
    }

    int digits = (int)lowp_format_bits(f) / 4;
    printf("lowp diff %s: %zu inputs (seed 0x%llx), %zu on which the implementations disagree, %d groups\n\n",
           fname, n, (unsigned long long)seed, disagree, ngroups);
    printf("| input class | inputs | example (bits) | example |");
    for (int k = 0; k < ncol; k++)
        printf(" %s |", cols[k].name);
    printf("\n|---|---:|---|---|");
    for (int k = 0; k < ncol; k++)
        printf("---|");
    printf("\n");
    for (int g = 0; g < ngroups; g++) {
        uint32_t b;
        memcpy(&b, &groups[g].example, sizeof b);
        printf("| %s | %zu | 0x%08x | %.9g |", groups[g].cls, groups[g].count, b, (double)groups[g].example);
        for (int k = 0; k < ncol; k++)
            printf(" 0x%0*x |", digits, groups[g].codes[k]);
        printf("\n");
    }
    if (f == LOWP_E2M1)
        printf("\nPyTorch 2.11 has no float to float4_e2m1fn_x2 cast, so torch has no column here.\n");
    free(x);
    return LOWP_EXIT_OK;
}
