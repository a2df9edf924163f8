/* gpu/bench/sm_clock.h's sampler. NVML's C interface is declared here by hand (the functions
 * lowp uses, with NVML's documented types and constants) because the toolkit on CPU-only
 * machines ships no nvml.h; the functions come from dlopen. */
#define _POSIX_C_SOURCE 200809L
#include "sm_clock.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

typedef void *nvml_device;                 /* nvmlDevice_t */
enum { NVML_OK = 0, NVML_CLOCK_SM = 1 };   /* NVML_SUCCESS, nvmlClockType_t */
#define LIMIT_REASONS 0xECull              /* 0x4 | 0x8 | 0x20 | 0x40 | 0x80 */

struct lowp_sm_clock {
    void *lib;
    nvml_device dev;
    int (*shutdown)(void);
    int (*clock)(nvml_device, int, unsigned *);
    int (*reasons)(nvml_device, unsigned long long *);
    pthread_t thread;
    int running;
    atomic_int stop;
    /* written by the sampling thread only, read after it is joined */
    int n, limited;
    double sum, min;
};

lowp_sm_clock *lowp_sm_clock_open(const char *pci_bus_id)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL)
        return NULL;
    lowp_sm_clock *c = calloc(1, sizeof *c);
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*by_bus)(const char *, nvml_device *) =
        (int (*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    if (c == NULL || init == NULL || by_bus == NULL || init() != NVML_OK) {
        free(c);
        dlclose(lib);
        return NULL;
    }
    c->lib = lib;
    c->shutdown = (int (*)(void))dlsym(lib, "nvmlShutdown");
    c->clock = (int (*)(nvml_device, int, unsigned *))dlsym(lib, "nvmlDeviceGetClockInfo");
    /* the newer name first; the older one is the same function in drivers before 535 */
    c->reasons = (int (*)(nvml_device, unsigned long long *))dlsym(
        lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (c->reasons == NULL)
        c->reasons = (int (*)(nvml_device, unsigned long long *))dlsym(
            lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    if (c->clock == NULL || by_bus(pci_bus_id, &c->dev) != NVML_OK) {
        lowp_sm_clock_close(c);
        return NULL;
    }
    return c;
}

static void *sample(void *arg)
{
    lowp_sm_clock *c = arg;
    const struct timespec ms = {0, 1000000};
    while (!atomic_load(&c->stop)) {
        unsigned mhz = 0;
        unsigned long long why = 0;
        if (c->clock(c->dev, NVML_CLOCK_SM, &mhz) == NVML_OK && mhz > 0) {
            c->sum += mhz;
            c->min = c->n == 0 || mhz < c->min ? mhz : c->min;
            c->n++;
            if (c->reasons && c->reasons(c->dev, &why) == NVML_OK && (why & LIMIT_REASONS))
                c->limited++;
        }
        nanosleep(&ms, NULL);
    }
    return NULL;
}

int lowp_sm_clock_start(lowp_sm_clock *c)
{
    if (c == NULL)
        return 0;
    c->n = c->limited = 0;
    c->sum = c->min = 0.0;
    atomic_store(&c->stop, 0);
    c->running = pthread_create(&c->thread, NULL, sample, c) == 0;
    return c->running ? 0 : -1;
}

void lowp_sm_clock_stop(lowp_sm_clock *c, lowp_sm_clock_stats *s)
{
    s->samples = 0;
    s->mean_mhz = s->min_mhz = s->limited = NAN;
    if (c == NULL || !c->running)
        return;
    atomic_store(&c->stop, 1);
    pthread_join(c->thread, NULL);
    c->running = 0;
    if (c->n > 0) {
        s->samples = c->n;
        s->mean_mhz = c->sum / c->n;
        s->min_mhz = c->min;
        s->limited = (double)c->limited / c->n;
    }
}

void lowp_sm_clock_close(lowp_sm_clock *c)
{
    if (c == NULL)
        return;
    if (c->running) {
        lowp_sm_clock_stats s;
        lowp_sm_clock_stop(c, &s);
    }
    if (c->shutdown)
        c->shutdown();
    dlclose(c->lib);
    free(c);
}
