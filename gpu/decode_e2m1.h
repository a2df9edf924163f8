/* gpu/decode_e2m1.h: the sm_90 decode kernels' E2M1 -> BF16 decode (gpu/decode.cu), in C
 * that the host runs too, so that a CPU test (tests/test_decode_e2m1.c) checks the kernel's
 * own bit manipulation on every code pattern against the emulator's element values
 * (lowp/attn_gpu_emul.h step 1). On the device prmt is the PTX instruction; on the host
 * it is modelled from the PTX ISA's definition below. Not installed. */
#ifndef LOWP_DECODE_E2M1_H
#define LOWP_DECODE_E2M1_H

#include <stdint.h>

#ifdef __CUDACC__
#define LOWP_DEC_HD __host__ __device__ __forceinline__
#else
#define LOWP_DEC_HD static inline
#endif

/* prmt.b32 in its default mode: selector nibble k picks byte (k & 7) of {b, a} (a is
 * bytes 0..3); with bit 3 set it replicates that byte's sign bit (bit 7) over all 8 bits
 * instead. Only the low 16 bits of sel are used. */
LOWP_DEC_HD uint32_t lowp_dec_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
#else
    const uint64_t ab = ((uint64_t)b << 32) | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned s = (sel >> (4 * i)) & 0xFu;
        uint32_t byte = (uint32_t)(ab >> (8 * (s & 7u))) & 0xFFu;
        if (s & 8u)
            byte = (byte & 0x80u) ? 0xFFu : 0u;
        d |= byte << (8 * i);
    }
    return d;
#endif
}

/* Eight E2M1 codes q0..q7 (the nibbles of w, q0 lowest) -> four BF16 pairs, exact. pos = 0:
 * (q0, q1), (q2, q3), (q4, q5), (q6, q7), neighbouring dims of one row (K); pos = 1: (q0,
 * q2), (q1, q3), (q4, q6), (q5, q7), for w holding two rows interleaved byte by byte (V,
 * whose MMA pairs run along positions). Low half = first code of the pair.
 *
 * Byte tables of the BF16 magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6: high bytes {th,
 * 0x40404040}, low bytes {tl, 0xC0804000}, th = 0x3F3F3F00 and tl = 0xC0800000 (passed in
 * so that the kernel can keep them in registers), indexed by the 3-bit magnitude, 4 codes
 * per prmt (its selector is the low 16 bits). The sign comes from a sign-replicating prmt:
 * code k's sign bit (bit 4k + 3 of w) is bit 7 of byte k/2 of w << 4 for even k (selector
 * 8 + k/2) and of w for odd k (selector 12 + k/2). */
LOWP_DEC_HD void lowp_dec_e2m1x8_bf16(uint32_t w, uint32_t th, uint32_t tl, int pos,
                                      uint32_t *o)
{
    const uint32_t idx = w & 0x77777777u, idx_hi = idx >> 16, ws = w << 4;
    const uint32_t hi0 = lowp_dec_prmt(th, 0x40404040u, idx);
    const uint32_t lo0 = lowp_dec_prmt(tl, 0xC0804000u, idx);
    const uint32_t hi1 = lowp_dec_prmt(th, 0x40404040u, idx_hi);
    const uint32_t lo1 = lowp_dec_prmt(tl, 0xC0804000u, idx_hi);
    if (pos) {
        o[0] = lowp_dec_prmt(lo0, hi0, 0x6240u) | (lowp_dec_prmt(ws, w, 0x9080u) & 0x80008000u);
        o[1] = lowp_dec_prmt(lo0, hi0, 0x7351u) | (lowp_dec_prmt(ws, w, 0xD0C0u) & 0x80008000u);
        o[2] = lowp_dec_prmt(lo1, hi1, 0x6240u) | (lowp_dec_prmt(ws, w, 0xB0A0u) & 0x80008000u);
        o[3] = lowp_dec_prmt(lo1, hi1, 0x7351u) | (lowp_dec_prmt(ws, w, 0xF0E0u) & 0x80008000u);
    } else {
        o[0] = lowp_dec_prmt(lo0, hi0, 0x5140u) | (lowp_dec_prmt(ws, w, 0xC080u) & 0x80008000u);
        o[1] = lowp_dec_prmt(lo0, hi0, 0x7362u) | (lowp_dec_prmt(ws, w, 0xD090u) & 0x80008000u);
        o[2] = lowp_dec_prmt(lo1, hi1, 0x5140u) | (lowp_dec_prmt(ws, w, 0xE0A0u) & 0x80008000u);
        o[3] = lowp_dec_prmt(lo1, hi1, 0x7362u) | (lowp_dec_prmt(ws, w, 0xF0B0u) & 0x80008000u);
    }
}

#endif /* LOWP_DECODE_E2M1_H */
