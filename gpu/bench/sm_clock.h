/* gpu/bench/sm_clock.h: the SM clock of a GPU while something runs on it, sampled through
 * NVML. `lowp gpu bench` reports it beside each shape's time: on the H200 the driver's
 * power cap lowered the SM clock from 1980 MHz to 1560-1710 MHz during the largest
 * decodes, and the NVFP4 kernel, bound by instruction issue, slowed down with it while a
 * streaming read did not (reports/gpu-bench-h200.md). NVML is opened at run time
 * (libnvidia-ml.so.1, which comes with the driver), so lowp needs it neither to build nor
 * to load. Not installed. */
#ifndef LOWP_GPU_SM_CLOCK_H
#define LOWP_GPU_SM_CLOCK_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_sm_clock lowp_sm_clock;

typedef struct lowp_sm_clock_stats {
    int samples;      /* 0: nothing was sampled (the other fields are then NaN) */
    double mean_mhz;  /* mean of the samples */
    double min_mhz;
    double limited;   /* fraction of samples whose clock-event reasons include a power or
                       * thermal limit (NVML's SW power cap 0x4, HW slowdown 0x8, SW
                       * thermal 0x20, HW thermal 0x40, power brake 0x80) */
} lowp_sm_clock_stats;

/* The GPU at this PCI bus id (cudaDeviceGetPCIBusId's form), or NULL when NVML or the
 * device is not available; every function below accepts NULL and then does nothing. */
lowp_sm_clock *lowp_sm_clock_open(const char *pci_bus_id);
/* Starts sampling about every millisecond on a thread of its own; 0, or -1 if the thread
 * could not start (stop then reports no samples). */
int lowp_sm_clock_start(lowp_sm_clock *c);
/* Stops the sampling that start began and summarizes it. */
void lowp_sm_clock_stop(lowp_sm_clock *c, lowp_sm_clock_stats *s);
void lowp_sm_clock_close(lowp_sm_clock *c);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_SM_CLOCK_H */
