/* ref/model/src/gguf_quant.c: ggml's block formats to binary32 (lowp_gguf_dequantize).
 *
 * The formulas are ggml's dequantize_row_* (ggml-quants.c), with d and m the block's
 * binary16 scale and minimum converted exactly to binary32 (lowp_f16_bits_to_f32):
 *   Q4_0  {f16 d; u8 qs[16]}          y[j] = ((qs[j] & 15) - 8) * d,  y[j+16] = ((qs[j] >> 4) - 8) * d
 *   Q4_1  {f16 d, m; u8 qs[16]}       y[j] = (qs[j] & 15) * d + m,    y[j+16] = (qs[j] >> 4) * d + m
 *   Q8_0  {f16 d; i8 qs[32]}          y[j] = qs[j] * d
 *   F16, BF16                         exact widening; F32 copied
 * Exactness: a 4-bit or 8-bit integer times an 11-bit binary16 significand needs at most
 * 19 significant bits, so every product q * d is exact in binary32 (d subnormal in f16 is
 * normal in f32; no overflow: |q * d| <= 128 * 65504). The only rounding is Q4_1's "+ m",
 * one binary32 addition; the model layer is compiled with -ffp-contract=off, and with the
 * product exact an FMA would round identically anyway. So the result is a function of the
 * bits alone: any implementation of the same formula (ggml's C, PyPI gguf's numpy) agrees
 * bit for bit. */
#include "lowp/gguf.h"

#include <stdlib.h>
#include <string.h>

#include "lowp/tensor.h"
#include "lowp/why.h"

static float f16_at(const unsigned char *p) { return lowp_f16_bits_to_f32((uint16_t)(p[0] | p[1] << 8)); }

int lowp_gguf_dequantize(uint32_t type, const void *src, uint64_t n, float *dst, char *why, size_t why_len)
{
    const unsigned char *p = src;
    uint64_t block = 1, bytes = 0;
    const char *name;
    lowp_gguf_type_info(type, &block, &bytes, &name);
    if (n % block != 0)
        return lowp_why_set(why, why_len, "%llu elements are not whole %s blocks of %llu", (unsigned long long)n,
                            name, (unsigned long long)block);
    switch (type) {
    case LOWP_GGML_F32:
        memcpy(dst, p, n * 4);
        return 0;
    case LOWP_GGML_F16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = f16_at(p + 2 * i);
        return 0;
    case LOWP_GGML_BF16:
        for (uint64_t i = 0; i < n; i++)
            dst[i] = lowp_f32_from_bf16((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    case LOWP_GGML_Q4_0:
        for (uint64_t b = 0; b < n / 32; b++, p += 18, dst += 32) {
            float d = f16_at(p);
            for (int j = 0; j < 16; j++) {
                dst[j] = (float)((p[2 + j] & 15) - 8) * d;
                dst[j + 16] = (float)((p[2 + j] >> 4) - 8) * d;
            }
        }
        return 0;
    case LOWP_GGML_Q4_1:
        for (uint64_t b = 0; b < n / 32; b++, p += 20, dst += 32) {
            float d = f16_at(p), m = f16_at(p + 2);
            for (int j = 0; j < 16; j++) {
                dst[j] = (float)(p[4 + j] & 15) * d + m;
                dst[j + 16] = (float)(p[4 + j] >> 4) * d + m;
            }
        }
        return 0;
    case LOWP_GGML_Q8_0:
        for (uint64_t b = 0; b < n / 32; b++, p += 34, dst += 32) {
            float d = f16_at(p);
            for (int j = 0; j < 32; j++)
                dst[j] = (float)(int8_t)p[2 + j] * d;
        }
        return 0;
    default:
        return lowp_why_set(why, why_len, "cannot dequantize ggml type %s (%u): lowp reads F32, F16, BF16, "
                            "Q4_0, Q4_1 and Q8_0", name, type);
    }
}

float *lowp_gguf_tensor_f32(const lowp_gguf_tensor *t, char *why, size_t why_len)
{
    if (t->n_elements > SIZE_MAX / sizeof(float)) {
        lowp_why_set(why, why_len, "tensor of %llu elements is too large", (unsigned long long)t->n_elements);
        return NULL;
    }
    float *y = malloc((size_t)t->n_elements * sizeof *y + 1);
    if (y == NULL) {
        lowp_why_set(why, why_len, "out of memory for %llu floats", (unsigned long long)t->n_elements);
        return NULL;
    }
    if (lowp_gguf_dequantize(t->type, t->data, t->n_elements, y, why, why_len) != 0) {
        free(y);
        return NULL;
    }
    return y;
}
