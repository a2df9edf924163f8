/* tools/cmd_rank.c: `lowp rank [--devices D]`: this process's shard under --shard auto and,
 * with --devices, the GPU it would take among D visible devices (tools/gpu_rank.h).
 *
 * stdout, one line: "shard=K/N" (0/1 outside a launcher), then with --devices
 * " device=I" (I the chosen device, "-" when none is chosen); with a device chosen, stderr
 * has the line `lowp gpu` prints. It needs no GPU and no CUDA: tools/lowp_mpi.sh reads a
 * rank's shard from it (one reading of the environment, lowp's), and tests/test_mpi_cli.sh
 * tests the device choice with it. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "gpu_rank.h"

LOWP_COMMAND_DEFINE(rank, "this process's shard under --shard auto (MPI, Slurm) and its GPU");

int lowp_cmd_rank(int argc, char **argv)
{
    long devices = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--devices"))
            devices = (long)lowp_cli_parse_u64(argv[i], lowp_cli_option_value(argc, argv, &i), 0, 1 << 16);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: lowp rank [--devices D]\n"
                 "  prints shard=K/N (the shard --shard auto takes here) and, with --devices, device=I:\n"
                 "  the GPU of D visible ones that lowp gpu selects (local rank mod D; LOWP_GPU_DEVICE\n"
                 "  overrides; - when none is chosen)");
            return 0;
        } else
            lowp_cli_fail("lowp rank: unknown option '%s' (see lowp rank --help)", argv[i]);
    }
    lowp_gpu_rank r;
    lowp_gpu_rank_choose(devices < 0 ? 0 : (int)devices, &r);
    if (devices < 0) {
        printf("shard=%zu/%zu\n", r.k, r.n);
        return 0;
    }
    char line[256];
    lowp_gpu_rank_line(&r, (int)devices, NULL, line, sizeof line);
    if (r.device >= 0) {
        printf("shard=%zu/%zu device=%d\n", r.k, r.n, r.device);
        fprintf(stderr, "%s\n", line);
    } else
        printf("shard=%zu/%zu device=-\n", r.k, r.n);
    return 0;
}
