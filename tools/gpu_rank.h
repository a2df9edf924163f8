/* tools/gpu_rank.h: which GPU a rank of an MPI or Slurm launch runs on.
 *
 * One rank per GPU: a launcher starts ranks on each host with a local rank 0..L-1
 * (OMPI_COMM_WORLD_LOCAL_RANK for Open MPI, MPI_LOCALRANKID for MPICH / Intel MPI,
 * SLURM_LOCALID for srun; the first set wins), and the rank takes device local mod D of the
 * D devices CUDA shows it (so CUDA_VISIBLE_DEVICES still narrows the set; with fewer GPUs
 * than ranks on a host, ranks share them round-robin). LOWP_GPU_DEVICE=N overrides both
 * (device N of the visible ones). With neither, nothing is chosen: CUDA's default device.
 * The choice is where a kernel runs, never what it computes: the results (tools/shard.h)
 * hold no device, and the kernels are bit-exact against their emulators on any device.
 * The choice is a pure function of the environment and D (tested on the CPU through
 * `lowp rank --devices D`, tests/test_mpi_cli.sh). */
#ifndef LOWP_GPU_RANK_H
#define LOWP_GPU_RANK_H

#include <stddef.h>

typedef struct lowp_gpu_rank {
    int have_shard;        /* a launcher's rank or array task is set (lowp_cli_env_shard) */
    size_t k, n;           /* this process's shard, 0/1 when !have_shard */
    long local;            /* the local rank, -1 when no local-rank variable is set */
    const char *local_var; /* the variable it came from, or NULL */
    int overridden;        /* the device is LOWP_GPU_DEVICE's */
    int device;            /* the device to select, 0 <= device < D; -1: none chosen */
} lowp_gpu_rank;

/* The choice among `devices` visible devices (>= 0). With no device, nothing is chosen
 * (the caller reports that there is no GPU). A LOWP_GPU_DEVICE that is not an integer, or
 * is not below `devices` (> 0), and a local rank that is not a non-negative integer end
 * the program with one line (lowp_cli_fail). */
void lowp_gpu_rank_choose(int devices, lowp_gpu_rank *r);

/* The one stderr line that says the choice, e.g. "rank 1/2: GPU 0 of 1 (NVIDIA H200)"
 * (name may be NULL: no parenthesis); "" when nothing was chosen. */
void lowp_gpu_rank_line(const lowp_gpu_rank *r, int devices, const char *name, char *buf, size_t len);

#endif
