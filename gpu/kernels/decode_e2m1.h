/* gpu/kernels/decode_e2m1.h: the sm_90 decode kernels' E2M1 -> BF16 decode (gpu/kernels/decode.cu) and
 * MXFP4's E8M0 scale conversion, in C that the host runs too, so that a CPU test
 * (tests/test_decode_e2m1.c) checks the kernels' own bit manipulation on every code
 * pattern against the emulator's element values (lowp/attn_gpu_emul.h step 1). On the
 * device prmt is the PTX instruction; on the host it is modelled from the PTX ISA's
 * definition below (the kernels still use prmt to interleave V rows). Not installed. */
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

/* Eight E2M1 codes q0..q7 (the nibbles of w, q0 lowest) -> four pairs (q0, q4), (q1, q5),
 * (q2, q6), (q3, q7) (low half = the first code), each half the BF16 whose bits are the
 * code's sign at bit 15 and its exponent and mantissa bits e1 e0 m at bits 8..6: the
 * BF16 value 2^-126 x the code's value, exactly (e = 0 lands in BF16's subnormals as m x
 * 2^-127, e >= 1 gives 2^(e-127) x 1.m, the E2M1 values shifted by the bias difference
 * 127 - 1). One BF16 multiply by 2^126 (exact, LOWP_DEC_E2M1_UNBIAS) restores the value;
 * NVFP4 multiplies by its block scale times 2^119 instead (LOWP_DEC_NVFP4_SCALE_FIX).
 *
 * Pair j of w is nibbles j and j + 4, 16 bits apart, so one mask picks both and one
 * integer multiply by 2^a + 2^b places both halves' magnitudes (a) and signs (b) at once:
 * the two shifted copies of a lone nibble never overlap, so the sum is their OR, and a
 * last mask drops what each copy carries into the other's field. Pairs 2 and 3 are pairs
 * 0 and 1 of w >> 8. Per pair 2 masks and a multiply (the H200 issues the multiply on its
 * FMA pipe), where the byte tables this replaced took about 5 ALU instructions: the ALU
 * pipe, at half the issue rate, is what bound the NVFP4 kernel. */
LOWP_DEC_HD void lowp_dec_e2m1x8_sub(uint32_t w, uint32_t *o)
{
    const uint32_t keep = 0x81C081C0u; /* bits 15, 8..6 of each half */
    const uint32_t r = w >> 8;
    o[0] = ((w & 0x000F000Fu) * 0x1040u) & keep;  /* << 6 and << 12 */
    o[1] = ((w & 0x00F000F0u) * 0x0104u) & keep;  /* << 2 and << 8 */
    o[2] = ((r & 0x000F000Fu) * 0x1040u) & keep;
    o[3] = ((r & 0x00F000F0u) * 0x0104u) & keep;
}

/* The BF16 pair 2^126 x 2^126 (0x7E80 each): lowp_dec_e2m1x8_sub's pairs times it, in
 * BF16 (exact: the products are the E2M1 values), are the codes' values. */
#define LOWP_DEC_E2M1_UNBIAS 0x7E807E80u

/* The BF16 pair 2^119 x 2^119 (0x7B00 each): NVFP4 block scales times it (448 x 2^119 <
 * 2^128, so it fits BF16) take lowp_dec_e2m1x8_sub's pairs to the 2^-7 x value x scale
 * of lowp/attn_gpu_emul.h's step 1 in one BF16 multiply. */
#define LOWP_DEC_NVFP4_SCALE_FIX 0x7B007B00u

/* MXFP4's E8M0 scale byte c -> the BF16 bits of 2^(c-127), exact for every c: the byte
 * is BF16's exponent field, except that c = 0 (2^-127) is the subnormal 0x0040 and c =
 * 0xFF is NaN (0x7FC0, not the Inf that the field alone would give); bit 6 is set for
 * exactly those two. The kernels multiply lowp_dec_e2m1x8_sub's pairs by
 * LOWP_DEC_E2M1_UNBIAS and then by this, both in BF16, which gives step 1's MXFP4
 * element value (tests/test_decode_e2m1.c checks every code and scale byte). */
LOWP_DEC_HD uint32_t lowp_dec_e8m0_bf16(uint8_t c)
{
    return ((uint32_t)c << 7) | ((uint8_t)(c + 1) <= 1 ? 0x40u : 0u);
}

#endif /* LOWP_DECODE_E2M1_H */
