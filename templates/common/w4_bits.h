/*
 * This file contains the bit-level half of the tensor-core backends' 4-bit weight decoding
 * (int4 of w4a16, e2m1 of mxfp4): from one 32-bit word of packed nibbles (8 elements, the
 * even index in the low nibble) to the 16-bit patterns of MMA operand pairs, and the dtype
 * patterns of the constants and scales the arithmetic half (mma_w4_dequant.cuh) multiplies
 * them by. Plain C shared by the templates (NVRTC) and the host tests, which check every
 * nibble, zero point and e8m0 byte against the contract's decoding (tests/check_w4_bits.c).
 *
 * Pair i (0..3) of a word is its byte i: nibble 2i goes to the LOW half of the result, nibble
 * 2i + 1 to the high half, which is the order an MMA register holds two consecutive k.
 *
 *   int4   prmt(q, q >> 4) puts nibble 2i in bits 0..3 and 2i + 1 in bits 16..19; OR-ing the
 *          pattern of the dtype's 2^m (bf16 128 = 0x4300, fp16 1024 = 0x6400, whose ulp is 1)
 *          gives the exact values 2^m + n; subtracting 2^m + zp leaves n − zp exactly
 *   e2m1   prmt(q << 4, q) puts nibble 2i in bits 4..7 and 2i + 1 in bits 20..23, and fills
 *          bytes 1 and 3 with copies of each nibble's sign (the prmt's sign-replicating
 *          selectors). One mask keeps the three exponent and mantissa bits at 4..6 and 20..22
 *          and one sign bit of each filled byte, chosen so that times 4 (bf16; fp16 32) the
 *          sign lands on bit 15 or 31 and the three bits on the dtype's two lowest exponent
 *          bits and its top mantissa bit. The pattern reads e2m1 · 2^-126 (bf16) or · 2^-14
 *          (fp16), subnormal codes included; multiplying by 2^126 or 2^14 is exact. A pair is
 *          a PRMT and a LOP3 on the ALU pipe, which the decode GEMMs keep busiest, and the
 *          multiply, which ptxas issues to the FMA pipe (docs/PERFORMANCE.md)
 *
 * (The Marlin kernels' idea of building 16-bit values with one LOP3 on an exponent pattern,
 * applied here to the contract's unpermuted nibble order with a PRMT per pair.)
 */
#ifndef MJ_TEMPLATES_COMMON_W4_BITS_H
#define MJ_TEMPLATES_COMMON_W4_BITS_H

#ifdef __CUDACC_RTC__
#define MJ_W4_FN __device__ __forceinline__
typedef unsigned int mj_w4_u32;
#else
#include <stdint.h>
#define MJ_W4_FN static inline
typedef uint32_t mj_w4_u32;
#endif

/* prmt selector of pair i: result bytes 0, 1 from byte i of the first operand, 2, 3 from
 * byte i of the second (only one byte of each half is kept by what follows) */
#define MJ_W4_PAIR_SEL(i) ((unsigned)(i) | ((unsigned)(i) << 4) | ((4u + (unsigned)(i)) << 8) | ((4u + (unsigned)(i)) << 12))
/* the same bytes, but bytes 1 and 3 the sign (bit 7) of the byte copied below them, replicated
 * over the byte (a selector nibble's bit 3) */
#define MJ_W4_PAIR_SEL_SIGN(i) (MJ_W4_PAIR_SEL(i) | 0x8080u)

/* Dtype patterns (bf16 / fp16) of the constants the arithmetic half uses. */
#define MJ_W4_U4_BASE_BF16 0x4300u  /* 128: its ulp is 1, so 128 + n is exact */
#define MJ_W4_U4_BASE_FP16 0x6400u  /* 1024 */
#define MJ_W4_E2M1_UNIT_BF16 0x7e80u /* 2^126: an e2m1 pattern reads 2^-126 times its value */
#define MJ_W4_E2M1_UNIT_FP16 0x7400u /* 2^14 */

/* The PTX prmt (default mode: a selector nibble's bits 0..2 pick a byte of {b, a}; its bit 3
 * replicates that byte's bit 7 over the result byte). */
MJ_W4_FN mj_w4_u32 mj_w4_prmt(mj_w4_u32 a, mj_w4_u32 b, mj_w4_u32 sel)
{
#ifdef __CUDACC_RTC__
    mj_w4_u32 r;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
#else
    const uint64_t x = ((uint64_t)b << 32) | a;
    mj_w4_u32 r = 0;
    for (int i = 0; i < 4; i++) {
        const unsigned nib = (sel >> (4 * i)) & 0xfu;
        mj_w4_u32 byte = (mj_w4_u32)(x >> (8 * (nib & 7u))) & 0xffu;
        if (nib & 8u) byte = (byte & 0x80u) ? 0xffu : 0u;
        r |= byte << (8 * i);
    }
    return r;
#endif
}

/* (a & mask) | bits in one PTX lop3: written as C, the compiler splits it into two LOP3s, each
 * taking its constant as the one immediate a LOP3 has; here ptxas keeps one in a register. */
MJ_W4_FN mj_w4_u32 mj_w4_and_or(mj_w4_u32 a, mj_w4_u32 mask, mj_w4_u32 bits)
{
#ifdef __CUDACC_RTC__
    mj_w4_u32 r;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;\n" : "=r"(r) : "r"(a), "r"(mask), "r"(bits)); /* (a & b) | c */
    return r;
#else
    return (a & mask) | bits;
#endif
}

/* int4 pair i of q as the dtype patterns of 2^m + n (q_shr4 = q >> 4, shared by the 4 pairs);
 * lean: the mask and the OR as two LOP3s on immediates, one register fewer. */
MJ_W4_FN mj_w4_u32 mj_w4_u4_pair(mj_w4_u32 q, mj_w4_u32 q_shr4, int i, int fp16, int lean)
{
    const mj_w4_u32 base = fp16 ? MJ_W4_U4_BASE_FP16 : MJ_W4_U4_BASE_BF16;
    const mj_w4_u32 r = mj_w4_prmt(q, q_shr4, MJ_W4_PAIR_SEL(i));
    return lean ? (r & 0x000f000fu) | (base << 16) | base : mj_w4_and_or(r, 0x000f000fu, (base << 16) | base);
}

/* e2m1 pair i of q as the dtype patterns of e2m1 · 2^-126 (bf16) or · 2^-14 (fp16)
 * (q_shl4 = q << 4, shared by the 4 pairs). */
MJ_W4_FN mj_w4_u32 mj_w4_e2m1_pair(mj_w4_u32 q, mj_w4_u32 q_shl4, int i, int fp16)
{
    const mj_w4_u32 r = mj_w4_prmt(q_shl4, q, MJ_W4_PAIR_SEL_SIGN(i));
    /* bits 4..6 to 6..8 (bf16) or 9..11 (fp16), a sign copy at 13 (10) to 15, and so above */
    return (r & (fp16 ? 0x04700470u : 0x20702070u)) * (fp16 ? 32u : 4u);
}

/* The dtype pattern of 2^m + zp (zp 0..15), subtracted from an int4 pair. */
MJ_W4_FN mj_w4_u32 mj_w4_u4_bias(mj_w4_u32 zp, int fp16) { return (fp16 ? MJ_W4_U4_BASE_FP16 : MJ_W4_U4_BASE_BF16) | (zp & 0xfu); }

/* The dtype pattern of the e8m0 scale 2^(s − 127): s = 255 is NaN; bf16 holds every other
 * value (s = 0 as a subnormal); fp16 holds 2^-24 .. 2^15, below which a scale is 0 and above
 * which it is infinity (the dequantized weight is an fp16 value). */
MJ_W4_FN mj_w4_u32 mj_w4_e8m0_scale(mj_w4_u32 s, int fp16)
{
    s &= 0xffu;
    if (!fp16) return s == 255u ? 0x7fc0u : s == 0u ? 0x0040u : s << 7;
    if (s == 255u) return 0x7e00u;
    const int e = (int)s - 127;
    if (e > 15) return 0x7c00u;
    if (e >= -14) return (mj_w4_u32)(e + 15) << 10;
    if (e >= -24) return 1u << (e + 24);
    return 0u;
}

/* The one-multiply form of an e2m1 pair (the wgmma prefill producer's fused stages). Where a scale's dtype
 * pattern s lies in [MJ_W4_FUSED_MIN_BF16 or _FP16, MJ_W4_FUSED_MAX] (bf16 2^-126 .. 2, fp16
 * 2^-14 .. 2: e8m0 bytes 1 .. 128 and 113 .. 128), the unit and the scale multiply as one factor,
 * 2^126 · s or 2^14 · s, a normal dtype value whose pattern is s with the unit's exponent added;
 * a pair's pattern times it is then the two products' value exactly, since every e2m1 value
 * times those scales is a dtype value (tests/check_w4_bits.c checks every nibble and byte). */
#define MJ_W4_FUSED_MIN_BF16 0x0080u /* 2^-126 */
#define MJ_W4_FUSED_MIN_FP16 0x0400u /* 2^-14 */
#define MJ_W4_FUSED_MAX 0x4000u      /* 2 */
#define MJ_W4_FUSED_SHIFT_BF16 0x3f00u /* 126 in the exponent field */
#define MJ_W4_FUSED_SHIFT_FP16 0x3800u /* 14 */

/* Whether the low half of scale pattern s takes the one-multiply form (0 for s = 0, the scale
 * of k past K, and for NaN). */
MJ_W4_FN int mj_w4_e8m0_fusable(mj_w4_u32 s, int fp16)
{
    const mj_w4_u32 lo = fp16 ? MJ_W4_FUSED_MIN_FP16 : MJ_W4_FUSED_MIN_BF16;
    return (s & 0xffffu) - lo <= MJ_W4_FUSED_MAX - lo;
}

/* The fused factor of fusable scale pattern s, in each half s holds (no carry crosses halves). */
MJ_W4_FN mj_w4_u32 mj_w4_e8m0_fused(mj_w4_u32 s, int fp16)
{
    const mj_w4_u32 shift = fp16 ? MJ_W4_FUSED_SHIFT_FP16 : MJ_W4_FUSED_SHIFT_BF16;
    return s + (shift << 16 | shift);
}

/* Row-scaled mxfp4 in bf16 (the decode GEMMs: mma_w4_dequant.cuh says why the products keep
 * the contract's weights): a row whose largest e8m0 byte in a tile is m takes R = m − 128;
 * byte s's pair factor is 2^(s − 1 − R), one pattern in both halves, and the row's
 * accumulators are multiplied by 2^R at the end. Exact for m <= MAX_BYTE and m − s <= SPREAD. */
#define MJ_W4_ROW_SCALED_MAX_BYTE 252
#define MJ_W4_ROW_SCALED_SPREAD 133

/* The bias of a row whose largest byte is m (m = 255: the row is NaN, the bias garbage). */
MJ_W4_FN mj_w4_u32 mj_w4_row_bias(mj_w4_u32 m) { return (254u - m) * 0x00800080u; }

/* The pattern of byte s's factor in a row of bias bias. */
MJ_W4_FN mj_w4_u32 mj_w4_row_factor(mj_w4_u32 s, mj_w4_u32 bias) { return s * 0x00800080u + bias; }

/* The fp32 bits of 2^R of a row of bias bias: 2^-128 .. 2^126, NaN for m = 255. */
MJ_W4_FN mj_w4_u32 mj_w4_row_scale_bits(mj_w4_u32 bias)
{
    const mj_w4_u32 d = (bias & 0xffffu) >> 7; /* 254 − m, or 511 for m = 255 */
    if (d > 254u) return 0x7fc00000u;
    return d <= 252u ? (253u - d) << 23 : 0x00400000u >> (d - 253u);
}

#endif
