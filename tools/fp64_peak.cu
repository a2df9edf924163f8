/* tools/fp64_peak.cu: the GPU's binary64 FMA throughput (non-tensor DFMA), measured.
 *
 *   nvcc -O3 -arch=sm_90 tools/fp64_peak.cu -o fp64_peak && ./fp64_peak [FMAS]
 *
 * Why: lowp's QSA scoring kernel (gpu/kernels/select.cu) sums its dot products in binary64 in
 * the CPU model's order, one fma a product, so its time is at least FMAS / this rate. With
 * FMAS (default 268435456 = 16 sequences x 32768 compressed keys x 4 heads x 128 dims, issue
 * #19's 128K-context timing) it prints that floor next to the rate.
 *
 * Every thread runs 8 independent fma chains (enough in flight to cover the DFMA latency at
 * full occupancy), 2^12 steps each; the sum is written so that nothing is optimised away.
 * Timed with CUDA events over 5 launches after a warm-up, the best one reported. */
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(x)                                                                             \
    do {                                                                                  \
        cudaError_t e_ = (x);                                                             \
        if (e_ != cudaSuccess) {                                                          \
            fprintf(stderr, "fp64_peak: %s: %s\n", #x, cudaGetErrorString(e_));           \
            return 3;                                                                     \
        }                                                                                 \
    } while (0)

static const int STEPS = 4096, CHAINS = 8;

__global__ void dfma_chains(double *out, double a, double b)
{
    double x[CHAINS];
    for (int c = 0; c < CHAINS; c++)
        x[c] = threadIdx.x * 1e-3 + c;
    for (int s = 0; s < STEPS; s++)
#pragma unroll
        for (int c = 0; c < CHAINS; c++)
            x[c] = fma(x[c], a, b);
    double t = 0.0;
    for (int c = 0; c < CHAINS; c++)
        t += x[c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = t;
}

int main(int argc, char **argv)
{
    const double fmas = argc > 1 ? atof(argv[1]) : 268435456.0;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    const int threads = 256, blocks = p.multiProcessorCount * 8;
    double *out;
    CK(cudaMalloc(&out, (size_t)blocks * threads * sizeof(double)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    dfma_chains<<<blocks, threads>>>(out, 0.999999, 1e-7);
    CK(cudaDeviceSynchronize());
    float best = 1e30f;
    for (int r = 0; r < 5; r++) {
        CK(cudaEventRecord(e0));
        dfma_chains<<<blocks, threads>>>(out, 0.999999, 1e-7);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        best = ms < best ? ms : best;
    }
    const double n = (double)blocks * threads * STEPS * CHAINS, rate = n / (best * 1e-3);
    printf("fp64_peak: %s, %d SMs: %.0f binary64 FMAs in %.3f ms = %.2f TFMA/s (%.1f TFLOP/s); %.0f FMAs take "
           ">= %.1f us at this rate\n",
           p.name, p.multiProcessorCount, n, best, rate * 1e-12, 2 * rate * 1e-12, fmas, fmas / rate * 1e6);
    CK(cudaFree(out));
    return 0;
}
