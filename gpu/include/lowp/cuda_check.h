/* lowp/cuda_check.h: the one way host code in gpu/ turns a failed CUDA runtime call into
 * lowp's one-line refusal. LOWP_CUDA_CK(call) expects, in the calling function, `int rc`,
 * `char *why`, `size_t wl` (the message buffer) and a label `out:` that frees what the
 * function allocated; on failure it sets rc = -1 with "call: CUDA's message" and jumps
 * there. Usable from C and CUDA C++. */
#ifndef LOWP_CUDA_CHECK_H
#define LOWP_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "lowp/why.h"

#define LOWP_CUDA_CK(call)                                                                         \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            rc = lowp_why_set(why, wl, "%s: %s", #call, cudaGetErrorString(e_));                   \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

#endif
