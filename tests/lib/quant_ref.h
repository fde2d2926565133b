/*
 * quant_ref.h — the tests' own quantizers, packers and dequantizers of moejit's weight formats
 * (docs/SEMANTICS.md §5), written from the contract and never from the templates.
 *
 * This file contains, per format, the one place that knows its device tensors: what bytes
 * hold the weights, the scales and the zero points, in which shape and order. A test draws
 * float weights, quantizes them here the way a checkpoint converter would (scales from each
 * block's amax), and gets both the device bytes and the exact dequantized floats the float64
 * reference multiplies. A separate decoder reads the bytes back, so the packers are checked
 * against the element decoders rather than against themselves.
 *
 * Device layouts (K = the reduction dimension, contiguous; [E, N, K] per matrix: W1 is
 * [E_local, rows, H], W2 is [E_local, H, I]):
 *   bf16 / fp16  data [E, N, K] in the dtype; no scale
 *   fp8_tensor   data [E, N, K] e4m3fn bytes; scale fp32 [E] (one per expert per matrix)
 *   fp8_block    data [E, N, K] e4m3fn bytes; scale fp32 [E, N/128, K/128]; N, K % 128 == 0
 *   w4a16        data [E, N, K/2] (two nibbles per byte along K, even index in the LOW
 *                nibble), value (q - zp) · scale; scale [E, N, K/g] in the dtype (bf16 as
 *                the contract says, fp16 for dtype=fp16); zero_point=0: zp is 8;
 *                zero_point=1: zero [E, N, ceil((K/g)/2)] nibbles packed like the weights
 *                along the group index, one row per (e, n); K % g == 0 (the kernels ask
 *                K % 2g == 0 with zero points, so rows fill whole bytes)
 *   mxfp4        data [E, N, K/2] e2m1 nibbles packed the same way; scale e8m0 bytes
 *                [E, N, K/32] (2^(s-127), s = 255 is NaN); K % 32 == 0
 * The scales this file chooses make every dequantized value exact in fp32 (fp32 scales keep
 * 16 significant bits), so `deq` holds exactly what an exact kernel multiplies.
 */
#ifndef MJ_TEST_QUANT_REF_H
#define MJ_TEST_QUANT_REF_H

#include <stddef.h>
#include <stdint.h>

#include "moejit.h"
#include "reference/reference.h"
#include "core/spec.h"

/* A weight format: the spec fields that decide the device tensors. */
typedef struct mj_qref_format {
    mj_quant quant;
    mj_dtype dtype;   /* the weights' dtype for quant bf16/fp16, w4a16's scale dtype */
    int group;        /* w4a16: 32, 64 or 128 */
    int zero_point;   /* w4a16: 1 = per-group zero points are given */
} mj_qref_format;

/* The format of a spec's weights. */
mj_qref_format mj_qref_format_of(const moejit_spec *spec);

/* One quantized matrix of every expert, [experts, rows, cols] with cols = K. */
typedef struct mj_qref_weights {
    int64_t experts, rows, cols;
    float *deq;                           /* [E, N, K]: the exact dequantized values */
    unsigned char *data, *scale, *zero;   /* device bytes (scale / zero NULL when none) */
    size_t data_bytes, scale_bytes, zero_bytes;
} mj_qref_weights;

/* ---- elements ------------------------------------------------------------------------------ */

/* e2m1: 1 sign, 2 exponent bits (bias 1), 1 mantissa bit: codes 0..7 are {0, 0.5, 1, 1.5, 2,
 * 3, 4, 6}, code | 8 the negatives. x rounds to nearest, ties to the even code, |x| > 6
 * saturates to ±6; NaN gives 0. */
unsigned mj_qref_e2m1_from_double(double x);
double mj_qref_e2m1_to_double(unsigned code);
/* e8m0: the byte s is 2^(s - 127); 255 is NaN. */
double mj_qref_e8m0_to_double(uint8_t s);

/* ---- 4-bit packing --------------------------------------------------------------------------- */

/* Bytes of one packed row of n nibbles: (n + 1) / 2 (an odd row's last high nibble is 0). */
size_t mj_qref_nibble_row_bytes(int64_t n);
/* Packs rows × n codes (0..15, one per byte in `codes`) two per byte along each row, the
 * element with the even index in the low nibble; dst holds rows · row_bytes(n) bytes. */
void mj_qref_pack_nibbles(const uint8_t *codes, int64_t rows, int64_t n, uint8_t *dst);
/* Element i of row `row` of a packed [rows, n] nibble array. */
unsigned mj_qref_nibble(const uint8_t *packed, int64_t n, int64_t row, int64_t i);

/* ---- weights ----------------------------------------------------------------------------------- */

/* The multiple that N and K of a matrix must be of for the format (0: no rule), with a
 * message naming `what` ("w1 rows", "hidden") when the shape does not fit. */
moejit_status mj_qref_check_shape(const mj_qref_format *f, int64_t N, int64_t K, const char *what);
/* The smallest multiple every dimension of a layer must be of for the format (1 where the
 * format sets no rule beyond the kernels' own). */
int64_t mj_qref_granule(const mj_qref_format *f);

/* Quantizes src [E, N, K] (any floats) into the format: bf16/fp16 round to nearest; fp8
 * scales are amax/448 per expert or 128×128 block (rounded up to 16 significant bits);
 * w4a16 scales are 16-bit (dtype) per group, symmetric around zp 8 (amax/7), or asymmetric with a zero
 * point from the group's minimum; mxfp4 scales are the smallest power of two that puts the
 * block's amax within ±6. Fills *out (free with mj_qref_weights_free). */
moejit_status mj_qref_quantize(const mj_qref_format *f, const float *src, int64_t E, int64_t N,
                               int64_t K, mj_qref_weights *out);
/* Reads w's device bytes back into floats [E, N, K], with the element decoders alone. */
moejit_status mj_qref_decode(const mj_qref_format *f, const mj_qref_weights *w, float *out);
void mj_qref_weights_free(mj_qref_weights *w);

/* ---- fp8 activations ---------------------------------------------------------------------------- */

/* Snaps x [T, H] in place so that the kernel's fp8 quantization of it (mode) is lossless:
 * each group (the tensor, a row, or 128 consecutive elements of a row) gets a power-of-two
 * scale s, every value becomes e4m3(x/s)·s, and the largest one becomes exactly ±448·s, so
 * that amax/448 = s in any rounding. The results are exact in bf16 and fp16. */
void mj_qref_fp8_snap_input(float *x, int64_t T, int64_t H, mj_ref_act_quant mode);
/* e4m3 bytes of x / scale (a static per-tensor scale), for already-quantized inputs. */
void mj_qref_fp8_encode(const float *x, size_t n, double scale, uint8_t *q);

#endif
