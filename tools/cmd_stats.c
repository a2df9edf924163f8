/* tools/cmd_stats.c: `lowp stats`: error statistics of every block format and recipe on
 * one tensor, side by side (lowp/stats.h defines every column).
 *
 * The input is a tensor file (.npy or .safetensors) or a built-in generator (lowp/gen.h);
 * the default is the built-in K-like tensor [4096, 8, 128], seed LOWP_DEFAULT_SEED.
 * Every (format, recipe) that lowp_recipe_check accepts gets one row; the formats with a
 * global scale take the recipe's own global scale from the tensor amax
 * (lowp_recipe_global_scale: NVFP4 2688/amax or amax/2688, sglang-kv 1.0, FP8 amax/max).
 *
 * The input and output options are shared with `lowp calibrate`: tools/cli_input.c. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lowp/block.h"
#include "lowp/calib.h"
#include "lowp/stats.h"

LOWP_COMMAND_DEFINE(stats, "error statistics of every block format and recipe on a tensor");

static const char stats_usage_line[] = "usage: lowp stats [INPUT] [--csv FILE] [--json FILE]\n";
static const char stats_options[] =
    "  output: a text table on stdout, one row per (format, recipe); --csv / --json write\n"
    "          every field (JSON adds the full block-scale code histogram); '-' is stdout\n"
    "          and then replaces the table. JSON has no Inf or NaN: a non-finite number\n"
    "          (an infinite input's global scale or SQNR) is written as null\n"
    "  columns: global_scale (decode side), SQNR_dB, rel_L2, RMSE, max_abs, cosine, ulp_mean /\n"
    "          ulp_max (error in bf16 ulps of the reference's binade), sat / flushed / nan (element\n"
    "          counts), sc_zero / sc_sub (zero and subnormal E4M3 block scales), blk_p50..blk_max\n"
    "          (quantiles of the per-block relative L2 error; 16-element blocks for FP8/BF16)\n";

int lowp_cmd_stats(int argc, char **argv)
{
    lowp_cli_table_out out = {NULL, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (lowp_cli_input_option(argc, argv, &i) || lowp_cli_table_option(argc, argv, &i, &out))
            continue;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            lowp_cli_input_print_usage(stdout, stats_usage_line, stats_options);
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("stats: unknown argument '%s' (see lowp stats --help)", a);
    }
    lowp_cli_table_check(&out);
    size_t shape[3];
    char desc[512];
    float *x = lowp_cli_input_load(shape, desc, sizeof desc);
    size_t n = shape[0] * shape[1] * shape[2];
    float amax = lowp_calib_amax(x, n);

    lowp_stats_row rows[LOWP_BLOCK_FORMAT_COUNT * LOWP_RECIPE_COUNT];
    float gsv[LOWP_BLOCK_FORMAT_COUNT * LOWP_RECIPE_COUNT];
    size_t k = 0, total = 0;
    char why[256];
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++)
            total += lowp_recipe_check((lowp_block_format)f, (lowp_recipe)r, NULL, 0) == 0;
    lowp_progress pr;
    lowp_progress_init(&pr, "stats");
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++)
        for (int r = 0; r < LOWP_RECIPE_COUNT; r++) {
            lowp_block_format bf = (lowp_block_format)f;
            lowp_recipe rc = (lowp_recipe)r;
            if (lowp_recipe_check(bf, rc, NULL, 0))
                continue;
            lowp_global_scale gs = lowp_recipe_global_scale(bf, rc, amax);
            lowp_stats_row *w = &rows[k];
            memset(w, 0, sizeof *w);
            w->format = lowp_block_format_name(bf);
            w->recipe = lowp_recipe_name(rc);
            lowp_progress_show(&pr, k, total, "rows", "%s %s", w->format, w->recipe);
            if (lowp_block_has_global_scale(bf)) {
                gsv[k] = gs.dec;
                w->gscales = &gsv[k];
                w->n_gscales = 1;
            }
            if (lowp_stats_quantized(bf, rc, gs, 0, x, n, NULL, &w->st, why, sizeof why))
                lowp_cli_fail("stats: %s %s: %s", w->format, w->recipe, why);
            k++;
        }
    lowp_progress_show(&pr, k, total, "rows", "done");
    lowp_progress_end(&pr);
    if (lowp_cli_table_on_stdout(&out)) {
        printf("# lowp stats: %s, amax %.9g; each recipe's own global scale from the amax\n", desc,
               (double)amax);
        if (lowp_stats_print_table(stdout, rows, k) || fflush(stdout) != 0)
            lowp_cli_fail("cannot write to standard output");
    }
    lowp_cli_table_write(&out, rows, k);
    free(x);
    return LOWP_EXIT_OK;
}
