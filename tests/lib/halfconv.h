/*
 * halfconv.h — host conversions between float/double and the 16-bit storage types (bf16,
 * fp16) for the tests.
 *
 * This file contains the test side's own conversions, written from IEEE 754 rather than
 * taken from the templates, so that a conversion bug in the kernels cannot hide behind the
 * same bug in the reference. Every rounding is round-to-nearest-even; NaN stays NaN (sign and
 * the top payload bits kept, quiet bit set); overflow gives ±inf as IEEE says.
 */
#ifndef MJ_TEST_HALFCONV_H
#define MJ_TEST_HALFCONV_H

#include <stddef.h>
#include <stdint.h>

#include "spec.h"

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

#endif
