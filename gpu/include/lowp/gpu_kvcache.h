/* lowp/gpu_kvcache.h: a paged KV cache on the GPU, and quantize-on-write kernels that
 * produce exactly the bytes lowp's CPU writer (lowp_kvcache_write) produces.
 *
 * Storage: the four buffers of lowp/kvcache.h, same sizes, same layout, same byte offsets
 * (codes NHD [num_pages][page_size][num_heads][row_bytes] or HND [num_pages][num_heads]
 * [page_size][row_bytes]; block scales likewise with S = dim / block size per row, linear or
 * in the NVFP4 4-token interleave). A buffer copied to the host byte for byte is the CPU
 * cache's buffer (lowp_kvcache_buffer); the GPU never places a byte the CPU would not.
 *
 * Writing (lowp_gpu_kv_write): token i of k/v goes to slot slots[i] = page * page_size +
 * slot_in_page (vLLM / SGLang slot mapping); a negative slot skips the token (vLLM's
 * padding). Each (token, head) row is quantized in blocks along the head dim by the
 * config's format, recipe and quant_flags with the global scale of that head (decode-side
 * g, encode-side 1/g, as lowp_global_scale_from_dec), step by step as lowp_block_quantize
 * does it in ref/block/src/block.c (gpu/kernels/kv_write.cu names the CPU step each device step
 * mirrors). Formats and recipes (lowp_gpu_kv_recipe_check): BF16, FP8 E4M3/E5M2 (exact),
 * NVFP4 (trtllm, exact, modelopt, sglang-kv; LOWP_BLOCK_SCALE_UP), MXFP4 and MXFP8 (ocp,
 * rceil, trtllm); the torch-op recipes (torchao*, compressed-tensors, modelopt for MX) are
 * CPU models of Python libraries and are refused. Every NaN the device's arithmetic makes
 * is the canonical 0x7FFFFFFF, so the GPU's modelopt is ModelOpt on CUDA tensors: the CPU
 * writer's bytes with LOWP_BLOCK_NAN_CANONICAL in quant_flags (without it the CPU models
 * ModelOpt on CPU tensors, whose NaN block scale is 0xFF where the GPU writes 0x7F). The
 * trtllm and sglang-kv recipes use the hardware rcp.approx.ftz.f32, which
 * lowp models bit for bit as the H200 (sm_90) computes it; on other GPUs that model is
 * unverified. Quantize counts are not computed on the GPU.
 *
 * Input: device arrays [n_tokens][num_heads][qk_dim] (K) and [n_tokens][num_heads][vo_dim]
 * (V) of BF16 bit patterns (uint16, value = the binary32 with those top 16 bits) or FP8
 * E4M3 codes (uint8, value = the code's exact value, NaN for 0x7F/0xFF). The CPU writer
 * given those binary32 values writes the same bytes.
 *
 * Contract with the CPU cache (checked by gpu/check/kv_write_check.c, byte for byte, untouched
 * poison bytes included): for any valid config the GPU accepts, global scales and inputs,
 * and slots that are distinct and in range, download(write(upload(C))) == lowp_kvcache_write
 * of each token (in any order, the slots being distinct) into C, C's quant_flags including
 * LOWP_BLOCK_NAN_CANONICAL (which only the modelopt NVFP4 recipe reads here).
 *
 * Errors: functions returning int give 0, or -1 with one sentence in why (may be NULL)
 * naming the offending argument or the failing CUDA call. lowp_gpu_kv_write checks
 * everything it can on the host before launching anything; a refusal launches nothing
 * and changes nothing. Launches are asynchronous on the given stream: errors raised while
 * the kernels run appear at the caller's next synchronizing call. Not thread-safe for
 * concurrent calls on one cache.
 */
#ifndef LOWP_GPU_KVCACHE_H
#define LOWP_GPU_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "lowp/kvcache.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lowp_gpu_kvcache {
    lowp_kv_config cfg;           /* as the CPU cache's */
    uint8_t *k_codes, *v_codes;   /* device buffers, same size and layout as lowp_kvcache_buffer(...) */
    uint8_t *k_scales, *v_scales; /* device; NULL for formats without block scales */
    size_t k_codes_bytes, v_codes_bytes, k_scales_bytes, v_scales_bytes;
    float *k_global, *v_global;   /* device, n_global floats each (1 or num_heads): decode-side scales */
    float *k_global_host, *v_global_host; /* host copies */
    size_t n_global;
} lowp_gpu_kvcache;

/* Allocate a cache for cfg (lowp_kv_config_check must accept it) on the current device,
 * every code and scale byte 0xFF (LOWP_KV_POISON, like lowp_kvcache_create), global scales
 * 1.0. *out is NULL on failure. Synchronous. */
int lowp_gpu_kvcache_create(const lowp_kv_config *cfg, lowp_gpu_kvcache **out, char *why,
                            size_t why_len);
/* Free everything create allocated (NULL is fine). Synchronous; no write may be in flight. */
void lowp_gpu_kvcache_destroy(lowp_gpu_kvcache *c);

/* Decode-side global scales, as lowp_kvcache_set_global_scales: n must be n_global (1 per
 * tensor, num_heads per head); k or v may be NULL to leave that side; values finite and
 * > 0; formats without a global scale (MX, BF16) accept only 1.0. Updates the host copies
 * and the device arrays (synchronous cudaMemcpy: no write on this cache may be in flight,
 * the kernels read k_global / v_global). */
int lowp_gpu_kvcache_set_global_scales(lowp_gpu_kvcache *c, const float *k, const float *v,
                                       size_t n, char *why, size_t why_len);

/* 0 if c is usable: not NULL, its cfg passes lowp_kv_config_check, its byte counts and
 * n_global are what cfg implies, and every pointer that must be set is set (scales NULL
 * exactly when the format has none). Else -1 naming the first inconsistent field. Reads
 * host fields only. */
int lowp_gpu_kvcache_check(const lowp_gpu_kvcache *c, char *why, size_t why_len);

/* Copy every code and scale byte and the global scales of a CPU cache to the GPU cache
 * (configs must be equal field by field, num_pages and recipe included). Synchronous. */
int lowp_gpu_kvcache_upload(lowp_gpu_kvcache *c, const lowp_kvcache *host, char *why,
                            size_t why_len);
/* Copy every byte and the global scales back into a CPU cache of the same config.
 * Synchronous (cudaMemcpy waits for work on the legacy default stream; a write on a
 * non-blocking stream must be synchronized by the caller first). */
int lowp_gpu_kvcache_download(const lowp_gpu_kvcache *c, lowp_kvcache *host, char *why,
                              size_t why_len);

typedef enum lowp_gpu_kv_input { LOWP_GPU_IN_BF16 = 0, LOWP_GPU_IN_E4M3 = 1 } lowp_gpu_kv_input;

/* Quantize-on-write of n_tokens tokens (see the top of this file). k_dev, v_dev: device
 * arrays [n_tokens][num_heads][qk_dim|vo_dim] of the input type; slots_dev: device int64
 * [n_tokens]. slots_host (may be NULL) is a host copy of the slots: when given, a slot
 * >= num_pages * page_size or a slot given to two tokens is refused before any launch.
 * Without it the device skips out-of-range slots (it never writes out of bounds) and two
 * tokens on one slot leave either token's bytes there. Refused before any launch: a NULL
 * cache or pointer, a config lowp_kv_config_check refuses or whose buffer sizes differ
 * from the cache's fields, an unknown input type, a host (unregistered) pointer for
 * k_dev/v_dev/slots_dev, sizes that overflow. n_tokens == 0 launches nothing and
 * succeeds. Launches one kernel for K and one for V on stream; returns after the
 * launches (asynchronous) with any launch error reported. */
int lowp_gpu_kv_write(lowp_gpu_kvcache *c, lowp_gpu_kv_input in, const void *k_dev,
                      const void *v_dev, const int64_t *slots_dev, const int64_t *slots_host,
                      size_t n_tokens, cudaStream_t stream, char *why, size_t why_len);

/* The same write run on the CPU by the very functions the kernels run (compiled for the
 * host by nvcc; rcp.approx through lowp_rcp_approx_ftz instead of the PTX instruction),
 * into a CPU cache's buffers with its global scales. k, v, slots are host arrays; slots
 * are range-checked (out of range: refused). For self-tests: it separates a logic error
 * (the host run differs from lowp_kvcache_write too) from a device-arithmetic one. */
int lowp_gpu_kv_write_emulate(lowp_kvcache *host, lowp_gpu_kv_input in, const void *k,
                              const void *v, const int64_t *slots, size_t n_tokens, char *why,
                              size_t why_len);

/* 0 if the kernels implement cfg's format and recipe (see the top of this file), else -1
 * with a one-line reason. lowp_gpu_kvcache_create and lowp_gpu_kv_write_emulate refuse
 * what it refuses. */
int lowp_gpu_kv_recipe_check(const lowp_kv_config *cfg, char *why, size_t why_len);

/* Name of an input type: "bf16", "e4m3". */
const char *lowp_gpu_kv_input_name(lowp_gpu_kv_input in);

#ifdef __cplusplus
}
#endif
#endif /* LOWP_GPU_KVCACHE_H */
