/* tools/bench_attn.c: `lowp bench attn`: the binary64 paged decode reference
 * (lowp_attn_paged_decode) over a quantized cache, in (token, KV head) pairs per second,
 * on one thread and on all, beside a plain read of the same cache pool in the same run. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "lowp/attn_bench.h"
#include "lowp/attn_paged.h"
#include "lowp/block.h"

int lowp_bench_attn(int argc, char **argv)
{
    lowp_attn_bench_decode_opts o = lowp_attn_bench_decode_defaults();
    int threads = lowp_bench_max_threads();
    const char *fmts = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--ctx") == 0)
            o.ctx = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, (uint64_t)1 << 24);
        else if (strcmp(a, "--batch") == 0)
            o.batch = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 1024);
        else if (strcmp(a, "--kv-heads") == 0)
            o.num_kv_heads = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 256);
        else if (strcmp(a, "--group") == 0)
            o.group = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 64);
        else if (strcmp(a, "--dim") == 0)
            o.head_dim = (size_t)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 32, 1024);
        else if (strcmp(a, "--threads") == 0)
            threads = (int)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 1024);
        else if (strcmp(a, "--reps") == 0)
            o.reps = (int)lowp_cli_parse_u64(a, lowp_cli_option_value(argc, argv, &i), 1, 101);
        else if (strcmp(a, "--format") == 0) {
            fmts = lowp_cli_option_value(argc, argv, &i);
            lowp_block_format bf;
            if (lowp_block_format_parse(fmts, &bf))
                lowp_cli_fail("bench attn: --format: unknown format '%s' (bf16 fp8_e4m3 fp8_e5m2 nvfp4 "
                              "mxfp4 mxfp8)", fmts);
        }
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            puts("usage: lowp bench attn [--format F] [--ctx N] [--batch B] [--kv-heads H] [--group G]\n"
                 "                       [--dim D] [--threads T] [--reps R]\n"
                 "binary64 paged decode reference; default NVFP4, ctx 131072, 8 KV heads, group 4,\n"
                 "dim 128; every format when --format is not given");
            return LOWP_EXIT_OK;
        } else
            lowp_cli_fail("bench attn: unknown argument '%s'", argv[i]);
    }
    char machine[512];
    lowp_machine_description(machine, sizeof machine);
    printf("lowp bench attn: binary64 paged decode, batch %zu, ctx %zu, %zu KV heads x group %zu, dim %zu, "
           "page %zu, median of %d\nmachine: %s\n\n",
           o.batch, o.ctx, o.num_kv_heads, o.group, o.head_dim, o.page_size, o.reps, machine);
    printf("%-9s | %8s %14s %12s | %8s %14s %12s %14s\n", "format", "threads", "pairs/s", "GB/s", "threads",
           "pairs/s", "GB/s", "pool read GB/s");
    for (int f = 0; f < LOWP_BLOCK_FORMAT_COUNT; f++) {
        lowp_block_format bf = (lowp_block_format)f;
        if (fmts != NULL && strcmp(fmts, lowp_block_format_name(bf)) != 0)
            continue;
        if (fmts == NULL && bf == LOWP_FP8_E5M2)
            continue;
        o.format = bf;
        lowp_attn_bench_decode_result r1, rt;
        char why[256];
        o.threads = 1;
        if (lowp_attn_bench_decode(&o, &r1, why, sizeof why))
            lowp_cli_fail("bench attn: %s", why);
        o.threads = threads;
        if (lowp_attn_bench_decode(&o, &rt, why, sizeof why))
            lowp_cli_fail("bench attn: %s", why);
        printf("%-9s | %8d %12.2f M %12.2f | %8d %12.2f M %12.2f %14.2f\n", lowp_block_format_name(bf), 1,
               r1.pairs_per_s / 1e6, r1.bytes_per_s / 1e9, rt.threads, rt.pairs_per_s / 1e6,
               rt.bytes_per_s / 1e9, rt.read_bytes_per_s / 1e9);
    }
    printf("\nA pair is one (token, KV head): its K and V rows read, dequantized and used by the\n"
           "group's query heads. GB/s counts cache bytes (codes and scales) read.\n");
    return LOWP_EXIT_OK;
}
