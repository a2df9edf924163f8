/* tools/cmd_calibrate.c: `lowp calibrate`: every global-scale calibration of lowp/calib.h on
 * one tensor, with the error statistics of each (lowp/stats.h), side by side with the
 * formats that need none (MXFP4, MXFP8, BF16).
 *
 * The input and output options are `lowp stats`'s (tools/cli_input.c). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/block.h"
#include "lowp/calib.h"
#include "lowp/stats.h"

LOWP_COMMAND_DEFINE(calibrate, "calibrate the NVFP4 / FP8 global scale and compare the errors");

static const char calibrate_usage_line[] =
    "usage: lowp calibrate [INPUT] [--format FORMAT] [--search-max N] [--csv FILE] [--json FILE]\n";
static const char calibrate_options[] =
    "  --format       nvfp4 fp8_e4m3 fp8_e5m2 mxfp4 mxfp8 bf16: only that format's rows\n"
    "                 (default: all, for comparison)\n"
    "  --search-max   elements the mse grid is scored on (0: all; default 262144); the winner\n"
    "                 and the amax choice are re-scored on the whole slice\n"
    "  rows: method fixed-1.0 (g = 1, SGLang's NVFP4 KV default), amax (each recipe's own;\n"
    "        sglang-kv: g = amax/2688 as a calibrated checkpoint gives), p99.9 / p99.99 (the\n"
    "        percentile of |x| in place of amax), mse (ModelOpt grid amax x linspace(0.25, 4, 39));\n"
    "        scope tensor or head (one global scale per head of [T, H, D]); NVFP4 block-scale\n"
    "        rounding nearest or up (LOWP_BLOCK_SCALE_UP). Columns as in lowp stats --help.\n";

/* One progress line per spec: its index and label, the rate in specs a second. */
static void calib_progress(void *arg, size_t done, size_t total, const char *what)
{
    lowp_progress_show(arg, done, total, "specs", "%s", what);
}

int lowp_cmd_calibrate(int argc, char **argv)
{
    lowp_cli_table_out out = {NULL, NULL};
    const char *fmt = NULL;
    size_t search_max = LOWP_CALIB_SEARCH_MAX;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (lowp_cli_input_option(argc, argv, &i) || lowp_cli_table_option(argc, argv, &i, &out))
            continue;
        if (strcmp(a, "--format") == 0)
            fmt = lowp_cli_option_value(argc, argv, &i);
        else if (strcmp(a, "--search-max") == 0) {
            search_max = (size_t)lowp_cli_parse_u64("--search-max", lowp_cli_option_value(argc, argv, &i), 0,
                                                    (uint64_t)1 << 40);
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            lowp_cli_input_print_usage(stdout, calibrate_usage_line, calibrate_options);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("calibrate: unknown argument '%s' (see lowp calibrate --help)", a);
    }
    lowp_cli_table_check(&out);
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
    lowp_progress pr;
    lowp_progress_init(&pr, "calibrate");
    if (lowp_calib_run_progress(x, &o, specs, ns, pr.on ? calib_progress : NULL, &pr, &t, why, sizeof why))
        lowp_cli_fail("calibrate: %s", why);
    lowp_progress_end(&pr);
    lowp_stats_row *rows = calloc(t.n ? t.n : 1, sizeof *rows);
    if (rows == NULL)
        lowp_cli_fail("out of memory for the table");
    lowp_calib_rows(&t, rows);

    if (lowp_cli_table_on_stdout(&out)) {
        size_t n = shape[0] * shape[1] * shape[2];
        printf("# lowp calibrate: %s, amax %.9g; global_scale is decode-side (per head: min..max)\n", desc,
               (double)lowp_calib_amax(x, n));
        if (lowp_stats_print_table(stdout, rows, t.n) || fflush(stdout) != 0)
            lowp_cli_fail("cannot write to standard output");
    }
    lowp_cli_table_write(&out, rows, t.n);
    free(rows);
    lowp_calib_table_free(&t);
    free(x);
    return LOWP_EXIT_OK;
}
