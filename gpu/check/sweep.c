/* gpu/check/sweep.c: the host half of the GPU sweeps: the CPU model's codes for a chunk of
 * binary32 inputs, compared with the codes the GPU sent back. OpenMP over blocks small
 * enough that lowp_encode_f32_u8/u16 stays single-threaded inside each (the inputs are
 * generated per block in a thread-local buffer, so nothing of 2^32 floats is stored). */
#define _POSIX_C_SOURCE 200809L
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cvt_internal.h"

#define BLOCK 16384 /* well under lowp's parallel threshold (2^18) */

double lowp_gpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t lowp_gpu_nan_count(uint64_t lo, uint64_t hi)
{
    /* NaN patterns: [0x7F800001, 0x80000000) and [0xFF800001, 0x100000000). */
    static const uint64_t r[2][2] = {{0x7F800001u, 0x80000000u},
                                     {0xFF800001u, UINT64_C(0x100000000)}};
    uint64_t n = 0;
    for (int k = 0; k < 2; k++) {
        uint64_t a = lo > r[k][0] ? lo : r[k][0];
        uint64_t b = hi < r[k][1] ? hi : r[k][1];
        if (b > a)
            n += b - a;
    }
    return n;
}

void lowp_gpu_merge_first(lowp_gpu_sweep *acc, const lowp_gpu_mismatch *m, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        unsigned k = acc->n_first;
        if (k == LOWP_GPU_FIRST_MAX && m[i].input >= acc->first[k - 1].input)
            break; /* m is ascending: nothing later fits either */
        if (k == LOWP_GPU_FIRST_MAX)
            k--; /* drop the largest */
        while (k > 0 && acc->first[k - 1].input > m[i].input) {
            acc->first[k] = acc->first[k - 1];
            k--;
        }
        acc->first[k] = m[i];
        if (acc->n_first < LOWP_GPU_FIRST_MAX)
            acc->n_first++;
    }
}

void lowp_gpu_record(lowp_gpu_sweep *acc, lowp_format out_format, uint32_t input,
                     int input_is_nan, uint16_t gpu, uint16_t cpu)
{
    acc->inputs++;
    if (input_is_nan)
        acc->nan_inputs++;
    if (gpu == cpu)
        return;
    acc->mismatches++;
    if (input_is_nan)
        acc->nan_input_mismatches++;
    int gn = lowp_code_is_nan(out_format, gpu), cn = lowp_code_is_nan(out_format, cpu);
    if (gn && !cn)
        acc->gpu_nan_cpu_not++;
    if (cn && !gn)
        acc->cpu_nan_gpu_not++;
    lowp_gpu_mismatch m = {input, gpu, cpu};
    lowp_gpu_merge_first(acc, &m, 1);
}

typedef struct local_acc {
    uint64_t mismatches, nan_input_mismatches, gpu_nan_cpu_not, cpu_nan_gpu_not;
    unsigned n_first;
    lowp_gpu_mismatch first[LOWP_GPU_FIRST_MAX];
} local_acc;

static void scan_block(const lowp_codec *c, uint32_t bits0, size_t m, const uint16_t *ref,
                       const void *gpu, int code_bytes, local_acc *la)
{
    for (size_t i = 0; i < m; i++) {
        uint16_t g = code_bytes == 1 ? ((const uint8_t *)gpu)[i] : ((const uint16_t *)gpu)[i];
        uint16_t r = ref[i];
        if (g == r)
            continue;
        uint32_t bits = bits0 + (uint32_t)i;
        la->mismatches++;
        if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
            la->nan_input_mismatches++;
        int gn = lowp_code_is_nan(c->format, g), cn = lowp_code_is_nan(c->format, r);
        if (gn && !cn)
            la->gpu_nan_cpu_not++;
        if (cn && !gn)
            la->cpu_nan_gpu_not++;
        if (la->n_first < LOWP_GPU_FIRST_MAX) {
            lowp_gpu_mismatch mm = {bits, g, r};
            la->first[la->n_first++] = mm;
        }
    }
}

void lowp_gpu_compare_f32_chunk(const lowp_codec *c, uint32_t first_bits, size_t n,
                                const void *gpu_codes, int code_bytes, int threads,
                                lowp_gpu_sweep *acc)
{
    long nblocks = (long)((n + BLOCK - 1) / BLOCK);
#ifdef _OPENMP
    int nt = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel num_threads(nt)
#endif
    {
        float in[BLOCK];
        uint16_t ref[BLOCK];
        uint8_t ref8[BLOCK];
        local_acc la;
        memset(&la, 0, sizeof la);
        /* static schedule: each thread gets ascending blocks, so la.first is ascending */
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (long b = 0; b < nblocks; b++) {
            size_t lo = (size_t)b * BLOCK;
            size_t m = n - lo < BLOCK ? n - lo : BLOCK;
            uint32_t bits0 = first_bits + (uint32_t)lo;
            for (size_t i = 0; i < m; i++) {
                uint32_t u = bits0 + (uint32_t)i;
                memcpy(&in[i], &u, sizeof u);
            }
            if (code_bytes == 1) {
                const uint8_t *g = (const uint8_t *)gpu_codes + lo;
                lowp_encode_f32_u8(c, in, ref8, m);
                if (memcmp(ref8, g, m) == 0)
                    continue;
                for (size_t i = 0; i < m; i++)
                    ref[i] = ref8[i];
                scan_block(c, bits0, m, ref, g, 1, &la);
            } else {
                const uint16_t *g = (const uint16_t *)gpu_codes + lo;
                lowp_encode_f32_u16(c, in, ref, m);
                if (memcmp(ref, g, m * sizeof *g) == 0)
                    continue;
                scan_block(c, bits0, m, ref, g, 2, &la);
            }
        }
#ifdef _OPENMP
#pragma omp critical(lowp_gpu_merge)
#endif
        {
            acc->mismatches += la.mismatches;
            acc->nan_input_mismatches += la.nan_input_mismatches;
            acc->gpu_nan_cpu_not += la.gpu_nan_cpu_not;
            acc->cpu_nan_gpu_not += la.cpu_nan_gpu_not;
            lowp_gpu_merge_first(acc, la.first, la.n_first);
        }
    }
    acc->inputs += n;
    acc->nan_inputs += lowp_gpu_nan_count(first_bits, (uint64_t)first_bits + n);
}
