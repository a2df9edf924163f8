/* tools/cmd_vectors.c: elementwise and block golden vectors.
 *
 *   lowp vectors gen    [--dir DIR] [--seed S] [--commit C]
 *   lowp vectors check  FILE --results R [--errors N] [--nan-any]
 *   lowp vectors verify [--dir DIR] [--errors N]
 *   lowp vectors gen-block    [--dir DIR] [--seed S] [--commit C]
 *   lowp vectors check-block  FILE --results R [--errors N]
 *   lowp vectors run-block    FILE [--out R]
 *   lowp vectors verify-block [--dir DIR] [--errors N]
 *
 * Elementwise: one text file per (operation, profile, rounding mode, saturation) that
 * lowp_codec_init accepts, in the TestFloat style: '#' header lines, then one case per line,
 * "<binary32 input bits> <expected code> [# flags]". Block: one JSON file per (block format,
 * recipe) that lowp_recipe_check accepts, in the Wycheproof style, expected codes from the
 * MPFR recipe oracle (lowp/oracle_block.h), read back through jansson. vectors/README.md is
 * the contract.
 *
 * Reproducibility: a file is a pure function of (format, profile, mode, saturation, seed,
 * commit string). The commit is provenance only: gen takes it from --commit (default:
 * lowp_source_commit, else "unknown"), and the regeneration test
 * passes the one recorded in the committed files, so it can compare byte for byte.
 *
 * This file only dispatches. The programs are in tools/vectors/: elementwise.c (gen, check,
 * verify), block_gen.c (the block case design and gen-block), block_read.c (reading a block
 * file), block_check.c (check-block, run-block, verify-block), common.c (shared helpers). */
#include "vectors/vectors.h"

#include "cli.h"

#include <stdio.h>
#include <string.h>

LOWP_COMMAND_DEFINE(vectors, "generate or check elementwise and block golden vectors");

/* ---------------------------------------------------------------------------------
 * lowp vectors */

static void usage(FILE *f)
{
    fprintf(f, "usage: lowp vectors gen    [--dir DIR] [--seed S] [--commit C]\n"
               "       lowp vectors check  FILE --results R [--errors N] [--nan-any]\n"
               "       lowp vectors verify [--dir DIR] [--errors N]\n"
               "       lowp vectors gen-block    [--dir DIR] [--seed S] [--commit C]\n"
               "       lowp vectors check-block  FILE --results R [--errors N]\n"
               "       lowp vectors run-block    FILE [--out R]\n"
               "       lowp vectors verify-block [--dir DIR] [--errors N]\n"
               "  Elementwise (vectors/elementwise) and block (vectors/block) golden vectors;\n"
               "  format: vectors/README.md.\n");
}

int lowp_cmd_vectors(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return LOWP_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
        usage(stdout);
        return LOWP_EXIT_OK;
    }
    if (strcmp(sub, "gen") == 0)
        return lowp_vec_cmd_gen(argc - 1, argv + 1);
    if (strcmp(sub, "check") == 0)
        return lowp_vec_cmd_check(argc - 1, argv + 1);
    if (strcmp(sub, "verify") == 0)
        return lowp_vec_cmd_verify(argc - 1, argv + 1);
    if (strcmp(sub, "gen-block") == 0)
        return lowp_vec_cmd_gen_block(argc - 1, argv + 1);
    if (strcmp(sub, "check-block") == 0)
        return lowp_vec_cmd_check_block(argc - 1, argv + 1);
    if (strcmp(sub, "run-block") == 0)
        return lowp_vec_cmd_run_block(argc - 1, argv + 1);
    if (strcmp(sub, "verify-block") == 0)
        return lowp_vec_cmd_verify_block(argc - 1, argv + 1);
    lowp_cli_fail("vectors: unknown subcommand '%s' (gen, check, verify, gen-block, check-block, "
                  "run-block or verify-block)", sub);
}
