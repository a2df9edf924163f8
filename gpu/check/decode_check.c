/* lowp_gpu_decode_check: the conformance run of the GPU decode kernel (lowp/gpu_conform.h)
 * as a ctest program and for tools/gpu_run.sh. `lowp gpu conform` runs the same code.
 *
 *   lowp_gpu_decode_check REPORT.md [--quick] [--cases N] [--long N] [--max-ctx N]
 *                         [--formats a,b] [--seed S]
 *
 * Exit: 0 all cases bit-exact and inside the bound, 1 otherwise, 2 bad usage or a failure
 * (one line on stderr), 77 no CUDA device (ctest: skipped). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_parse.h"

#include "lowp/gpu_conform.h"

static int usage(void)
{
    fprintf(stderr, "usage: lowp_gpu_decode_check REPORT.md [--quick] [--cases N] [--broad N] [--long N] "
                    "[--max-ctx N] [--formats a,b] [--seed S] [--threads T] [--emulator-only]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return usage();
    lowp_gpu_conform_opts o = lowp_gpu_conform_defaults();
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            o.cases_per_format = 2000;
            o.broad_cases = 1000;
            o.long_configs = 1;
            o.max_ctx = 32768;
        } else if (!strcmp(a, "--emulator-only")) {
            o.emulator_only = 1;
        } else if (v && !strcmp(a, "--cases")) {
            o.cases_per_format = lowp_cli_parse_count("--cases", v, 0);
            i++;
        } else if (v && !strcmp(a, "--broad")) {
            o.broad_cases = lowp_cli_parse_count("--broad", v, 1);
            i++;
        } else if (v && !strcmp(a, "--long")) {
            o.long_configs = lowp_cli_parse_count("--long", v, 1);
            i++;
        } else if (v && !strcmp(a, "--max-ctx")) {
            o.max_ctx = lowp_cli_parse_count("--max-ctx", v, 0);
            i++;
        } else if (v && !strcmp(a, "--formats")) {
            o.formats = v;
            i++;
        } else if (v && !strcmp(a, "--threads")) {
            o.threads = (int)lowp_cli_parse_u64("--threads", v, 1, 4096);
            i++;
        } else if (v && !strcmp(a, "--seed")) {
            o.seed = lowp_cli_parse_seed("--seed", v);
            i++;
        } else
            return usage();
    }
    if (o.max_ctx < 16) {
        fprintf(stderr, "lowp_gpu_decode_check: --max-ctx must be at least 16\n");
        return 2;
    }
    FILE *rep = fopen(argv[1], "w");
    if (!rep) {
        fprintf(stderr, "lowp_gpu_decode_check: cannot write %s\n", argv[1]);
        return 2;
    }
    lowp_gpu_conform_result r;
    char why[512] = "";
    int rc = lowp_gpu_conform_run(&o, rep, stdout, &r, why, sizeof why);
    fclose(rep);
    if (rc == 77) {
        printf("lowp_gpu_decode_check: %s: skipped\n", why);
        return 77;
    }
    if (rc) {
        fprintf(stderr, "lowp_gpu_decode_check: %s\n", why);
        return 2;
    }
    printf("gpu decode conform: %zu cases, %zu not bit-exact, %zu/%zu outside bound, worst "
           "ratio %.3g, %.1f s\n", r.cases, r.mismatched_cases, r.ref_outside, r.ref_cases,
           r.worst_ratio, r.seconds);
    return r.mismatched_cases || r.ref_outside ? 1 : 0;
}
