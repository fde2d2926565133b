/*
 * halfconv.h — host conversions between float/double and the float storage types of the
 * tests: the 16-bit bf16 and fp16, and the 8-bit e4m3fn of the fp8 formats.
 *
 * This file contains the test side's own conversions, written from IEEE 754 rather than
 * taken from the templates, so that a conversion bug in the kernels cannot hide behind the
 * same bug in the reference. Every rounding is round-to-nearest-even; NaN stays NaN (sign and
 * the top payload bits kept, quiet bit set); overflow gives ±inf as IEEE says for bf16/fp16,
 * and saturates to ±448 for e4m3fn (which has no infinity; the contract's "saturated").
 */
#ifndef MJ_TEST_HALFCONV_H
#define MJ_TEST_HALFCONV_H

#include <stddef.h>
#include <stdint.h>

#include "core/spec.h"

uint16_t mj_half_bf16_from_float(float f);
float mj_half_bf16_to_float(uint16_t h);
uint16_t mj_half_fp16_from_float(float f);
float mj_half_fp16_to_float(uint16_t h);

/* Bytes per element of dt (2 for bf16/fp16, 4 for fp32). */
size_t mj_half_dtype_size(mj_dtype dt);

/* f rounded to the nearest value of dt (identity for fp32). */
float mj_half_snap(float f, mj_dtype dt);

/* x rounded ONCE, directly, to dt. Rounding double -> float -> bf16 would round twice and
 * can land on the wrong side of a tie; the replay reference must not. */
double mj_half_round_double(double x, mj_dtype dt);

/* n floats -> dt's bytes in dst (fp32: a copy), and back. */
void mj_half_pack(const float *src, size_t n, mj_dtype dt, void *dst);
void mj_half_unpack(const void *src, size_t n, mj_dtype dt, float *dst);

/* e4m3fn (fp8 of the contract): 1 sign, 4 exponent bits (bias 7), 3 mantissa bits; no
 * infinity; S.1111.111 is NaN; largest finite 448; subnormals m·2^-9. */
#define MJ_E4M3_MAX 448.0
/* x rounded once, to nearest-even, to e4m3fn; |x| >= 448 (and ±inf) saturates to ±448;
 * NaN gives 0x7f (with x's sign). */
uint8_t mj_half_e4m3_from_double(double x);
/* The value of an e4m3fn byte (exact in float); 0x7f / 0xff are NaN. */
float mj_half_e4m3_to_float(uint8_t b);
/* x rounded to the nearest e4m3fn value, saturated (mj_half_e4m3_from_double then back). */
double mj_half_e4m3_round(double x);

#endif
