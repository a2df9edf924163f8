/* tools/cmd_calibrate.c: `lowp calibrate`: every global-scale calibration of lowp/calib.h on
 * one tensor, with the error statistics of each (lowp/stats.h), side by side with the
 * formats that need none (MXFP4, MXFP8, BF16).
 *
 * The input options are `lowp stats`'s (defined in tools/cmd_stats.c). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/block.h"
#include "lowp/calib.h"
#include "lowp/stats.h"

LOWP_COMMAND_DEFINE(calibrate, "calibrate the NVFP4 / FP8 global scale and compare the errors");

/* Defined in cmd_stats.c. */

static void calibrate_usage(FILE *f)
{
    fputs("usage: lowp calibrate [INPUT] [--format FORMAT] [--search-max N] [--csv FILE] [--json FILE]\n", f);
    fputs(lowp_cli_input_usage(), f);
    fputs("  --format       nvfp4 fp8_e4m3 fp8_e5m2 mxfp4 mxfp8 bf16: only that format's rows\n"
          "                 (default: all, for comparison)\n"
          "  --search-max   elements the mse grid is scored on (0: all; default 262144); the winner\n"
          "                 and the amax choice are re-scored on the whole slice\n"
          "  rows: method fixed-1.0 (g = 1, SGLang's NVFP4 KV default), amax (each recipe's own;\n"
          "        sglang-kv: g = amax/2688 as a calibrated checkpoint gives), p99.9 / p99.99 (the\n"
          "        percentile of |x| in place of amax), mse (ModelOpt grid amax x linspace(0.25, 4, 39));\n"
          "        scope tensor or head (one global scale per head of [T, H, D]); NVFP4 block-scale\n"
          "        rounding nearest or up (LOWP_BLOCK_SCALE_UP). Columns as in lowp stats --help.\n",
          f);
}

int lowp_cmd_calibrate(int argc, char **argv)
{
    const char *csv = NULL, *json = NULL, *fmt = NULL;
    size_t search_max = LOWP_CALIB_SEARCH_MAX;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (lowp_cli_input_option(argc, argv, &i))
            continue;
        if (strcmp(a, "--csv") == 0)
            csv = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--json") == 0)
            json = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--format") == 0)
            fmt = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--search-max") == 0) {
            search_max = (size_t)lowp_cli_parse_u64("--search-max", lowp_cli_option_value(argc, argv, &i), 0,
                                                    (uint64_t)1 << 40);
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            calibrate_usage(stdout);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("calibrate: unknown argument '%s' (see lowp calibrate --help)", a);
    }
    if (csv != NULL && json != NULL && strcmp(csv, "-") == 0 && strcmp(json, "-") == 0)
        lowp_cli_fail("--csv - and --json - would both write to standard output");
    lowp_out_check("--csv", csv);
    lowp_out_check("--json", json);
    lowp_cli_check_not_input("--csv", csv, "--in", lowp_cli_input_path());
    lowp_cli_check_not_input("--json", json, "--in", lowp_cli_input_path());
    lowp_cli_check_distinct_outputs("--csv", csv, "--json", json);
    lowp_block_format f = LOWP_NVFP4;
    if (fmt != NULL && lowp_block_format_parse(fmt, &f))
        lowp_cli_fail("unknown format '%s' (nvfp4 mxfp4 mxfp8 fp8_e4m3 fp8_e5m2 bf16)", fmt);

    size_t shape[3];
    char desc[512];
    float *x = lowp_cli_input_load(shape, desc, sizeof desc);
    lowp_calib_spec specs[LOWP_CALIB_MAX_SPECS];
    size_t ns = lowp_calib_default_specs(f, fmt == NULL, specs);
    lowp_calib_options o = {shape[0], shape[1], shape[2], search_max};
    lowp_calib_table t;
    char why[256];
    if (lowp_calib_run(x, &o, specs, ns, &t, why, sizeof why))
        lowp_cli_fail("calibrate: %s", why);
    lowp_stats_row *rows = calloc(t.n ? t.n : 1, sizeof *rows);
    if (rows == NULL)
        lowp_cli_fail("out of memory for the table");
    lowp_calib_rows(&t, rows);

    int table = !(csv != NULL && strcmp(csv, "-") == 0) && !(json != NULL && strcmp(json, "-") == 0);
    if (table) {
        size_t n = shape[0] * shape[1] * shape[2];
        printf("# lowp calibrate: %s, amax %.9g; global_scale is decode-side (per head: min..max)\n", desc,
               (double)lowp_calib_amax(x, n));
        if (lowp_stats_print_table(stdout, rows, t.n) || fflush(stdout) != 0)
            lowp_cli_fail("cannot write to standard output");
    }
    if (csv != NULL) {
        FILE *out = lowp_out_open(csv, 0);
        if (lowp_stats_write_csv(out, rows, t.n))
            lowp_cli_fail("cannot write '%s'", csv);
        lowp_out_commit(out);
    }
    if (json != NULL) {
        FILE *out = lowp_out_open(json, 0);
        if (lowp_stats_write_json(out, rows, t.n))
            lowp_cli_fail("cannot write '%s'", json);
        lowp_out_commit(out);
    }
    free(rows);
    lowp_calib_table_free(&t);
    free(x);
    return LOWP_EXIT_OK;
}
