/* tools/gpu_rank.c: the GPU of a rank (tools/gpu_rank.h). No CUDA here: the caller gives
 * the device count and selects the device. */
#include "gpu_rank.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

void lowp_gpu_rank_choose(int devices, lowp_gpu_rank *r)
{
    static const char *const local_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    r->k = 0;
    r->n = 1;
    r->have_shard = lowp_cli_env_shard(&r->k, &r->n);
    r->local = -1;
    r->local_var = NULL;
    r->overridden = 0;
    r->device = -1;
    for (size_t i = 0; i < sizeof local_vars / sizeof local_vars[0] && r->local < 0; i++) {
        const char *v = getenv(local_vars[i]);
        if (v == NULL)
            continue;
        /* 2^20 bounds the ranks of one host like the shards of a run (tools/cli_parse.c) */
        r->local = (long)lowp_cli_parse_u64(local_vars[i], v, 0, (uint64_t)1 << 20);
        r->local_var = local_vars[i];
    }
    const char *o = getenv("LOWP_GPU_DEVICE");
    if (o != NULL) {
        long d = (long)lowp_cli_parse_u64("LOWP_GPU_DEVICE", o, 0, 1 << 16);
        if (devices > 0 && d >= devices)
            lowp_cli_fail("LOWP_GPU_DEVICE=%ld: there are %d visible CUDA device%s (0..%d)", d, devices,
                          devices == 1 ? "" : "s", devices - 1);
        r->overridden = 1;
        r->device = devices > 0 ? (int)d : -1;
        return;
    }
    if (r->local >= 0 && devices > 0)
        r->device = (int)(r->local % devices);
}

void lowp_gpu_rank_line(const lowp_gpu_rank *r, int devices, const char *name, char *buf, size_t len)
{
    if (r->device < 0) {
        snprintf(buf, len, "%s", "");
        return;
    }
    char who[64], why[96];
    snprintf(who, sizeof who, "rank %zu/%zu", r->k, r->n);
    if (r->overridden)
        snprintf(why, sizeof why, "LOWP_GPU_DEVICE");
    else
        snprintf(why, sizeof why, "local rank %ld (%s) mod %d", r->local, r->local_var, devices);
    snprintf(buf, len, "%s: GPU %d of %d%s%s%s, from %s", who, r->device, devices, name ? " (" : "", name ? name : "",
             name ? ")" : "", why);
}
