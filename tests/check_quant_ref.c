/*
 * This file contains the tests of the tests' own quantization code: the e4m3fn conversion
 * (core/halfconv.c), the e2m1 / e8m0 codes, nibble packing, each weight format's
 * quantizer and independent decoder, and the fp8 activation quantization and input snapping
 * (tests/lib/quant_ref.c, reference/reference.c). The GPU suite builds every device tensor
 * with this code, so it is checked against values worked out by hand from the contract.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "core/halfconv.h"
#include "lib/quant_ref.h"
#include "reference/reference.h"

/* ---- e4m3fn ---------------------------------------------------------------------------------------- */

START_TEST(e4m3_saturates_at_448)
{
    ck_assert_uint_eq(mj_half_e4m3_from_double(448.0), 0x7e);
    ck_assert_uint_eq(mj_half_e4m3_from_double(449.0), 0x7e);
    ck_assert_uint_eq(mj_half_e4m3_from_double(480.0), 0x7e); /* the would-be next value */
    ck_assert_uint_eq(mj_half_e4m3_from_double(1e30), 0x7e);
    ck_assert_uint_eq(mj_half_e4m3_from_double(INFINITY), 0x7e);
    ck_assert_uint_eq(mj_half_e4m3_from_double(-449.0), 0xfe);
    ck_assert_uint_eq(mj_half_e4m3_from_double(-INFINITY), 0xfe);
    ck_assert_float_eq(mj_half_e4m3_to_float(0x7e), 448.0f);
    ck_assert_float_eq(mj_half_e4m3_to_float(0xfe), -448.0f);
    /* 416 is the largest value below: 1.625 · 2^8 */
    ck_assert_float_eq(mj_half_e4m3_to_float(0x7d), 416.0f);
    ck_assert_uint_eq(mj_half_e4m3_from_double(431.0), 0x7d);
}
END_TEST

START_TEST(e4m3_subnormals_are_multiples_of_two_to_minus_nine)
{
    ck_assert_float_eq(mj_half_e4m3_to_float(0x01), 0.001953125f); /* 2^-9 */
    ck_assert_float_eq(mj_half_e4m3_to_float(0x07), 7 * 0.001953125f);
    ck_assert_float_eq(mj_half_e4m3_to_float(0x08), 0.015625f); /* 2^-6: smallest normal */
    ck_assert_uint_eq(mj_half_e4m3_from_double(0.001953125), 0x01);
    /* 0.0009765625 = 2^-10 is half the smallest subnormal: the tie goes to even (zero) */
    ck_assert_uint_eq(mj_half_e4m3_from_double(0.0009765625), 0x00);
    ck_assert_uint_eq(mj_half_e4m3_from_double(0.0009765625 * 1.001), 0x01);
    ck_assert_uint_eq(mj_half_e4m3_from_double(-0.0009765625), 0x80); /* -0 */
    /* 3 · 2^-10 lies between 1 and 2 subnormal steps: even -> 2 */
    ck_assert_uint_eq(mj_half_e4m3_from_double(3 * 0.0009765625), 0x02);
    /* 7.5 · 2^-9 ties between the largest subnormal (7) and 2^-6 (8): even -> 0x08 */
    ck_assert_uint_eq(mj_half_e4m3_from_double(7.5 * 0.001953125), 0x08);
}
END_TEST

START_TEST(e4m3_rounds_half_to_even)
{
    ck_assert_uint_eq(mj_half_e4m3_from_double(1.0), 0x38);
    ck_assert_uint_eq(mj_half_e4m3_from_double(1.0625), 0x38);      /* 1 + 1/16: tie -> 1.0 */
    ck_assert_uint_eq(mj_half_e4m3_from_double(1.1875), 0x3a);      /* 1 + 3/16: tie -> 1.25 */
    ck_assert_uint_eq(mj_half_e4m3_from_double(1.0625 + 1e-9), 0x39); /* above the tie */
    ck_assert_uint_eq(mj_half_e4m3_from_double(248.0), 0x78);       /* 240 | 256: even -> 256 */
    ck_assert_uint_eq(mj_half_e4m3_from_double(-3.3), 0xc5);        /* -(1.625 · 2) = -3.25 */
    ck_assert_float_eq(mj_half_e4m3_to_float(0xc5), -3.25f);
    ck_assert_double_eq(mj_half_e4m3_round(67.2), 64.0);            /* ulp 8 in [64, 128) */
}
END_TEST

START_TEST(e4m3_every_byte_round_trips_and_nan_is_0x7f)
{
    for (unsigned b = 0; b < 256; b++) {
        float v = mj_half_e4m3_to_float((uint8_t)b);
        if ((b & 0x7f) == 0x7f) {
            ck_assert_msg(isnan(v), "byte 0x%02x should be NaN", b);
            continue;
        }
        ck_assert_msg(isfinite(v), "byte 0x%02x", b);
        ck_assert_uint_eq(mj_half_e4m3_from_double(v), b);
    }
    ck_assert_uint_eq(mj_half_e4m3_from_double(NAN) & 0x7f, 0x7f);
    ck_assert(isnan(mj_half_e4m3_round(NAN)));
}
END_TEST

/* ---- e2m1, e8m0, nibbles ------------------------------------------------------------------------------ */

START_TEST(e2m1_codes_are_the_contract_table)
{
    const double want[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    for (unsigned c = 0; c < 8; c++) {
        ck_assert_double_eq(mj_qref_e2m1_to_double(c), want[c]);
        ck_assert_double_eq(mj_qref_e2m1_to_double(c | 8u), -want[c]);
        ck_assert_uint_eq(mj_qref_e2m1_from_double(want[c]), c);
    }
    ck_assert_uint_eq(mj_qref_e2m1_from_double(-3.0), 0xd);
    /* ties to the even code */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(0.25), 0); /* 0 | 0.5 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(0.75), 2); /* 0.5 | 1 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(1.25), 2); /* 1 | 1.5 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(1.75), 4); /* 1.5 | 2 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(2.5), 4);  /* 2 | 3 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(3.5), 6);  /* 3 | 4 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(5.0), 6);  /* 4 | 6 */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(2.6), 5);
    ck_assert_uint_eq(mj_qref_e2m1_from_double(100.0), 7); /* saturates */
    ck_assert_uint_eq(mj_qref_e2m1_from_double(-100.0), 15);
}
END_TEST

START_TEST(e8m0_is_a_power_of_two_and_255_is_nan)
{
    ck_assert_double_eq(mj_qref_e8m0_to_double(127), 1.0);
    ck_assert_double_eq(mj_qref_e8m0_to_double(128), 2.0);
    ck_assert_double_eq(mj_qref_e8m0_to_double(120), 1.0 / 128);
    ck_assert_double_eq(mj_qref_e8m0_to_double(0), ldexp(1.0, -127));
    ck_assert_double_eq(mj_qref_e8m0_to_double(254), ldexp(1.0, 127));
    ck_assert(isnan(mj_qref_e8m0_to_double(255)));
}
END_TEST

START_TEST(nibbles_pack_the_even_index_in_the_low_nibble)
{
    const uint8_t codes[10] = {1, 2, 3, 4, 5, 0xa, 0xb, 0xc, 0xd, 0xe};
    uint8_t packed[6];
    ck_assert_uint_eq(mj_qref_nibble_row_bytes(5), 3);
    mj_qref_pack_nibbles(codes, 2, 5, packed);
    const uint8_t want[6] = {0x21, 0x43, 0x05, 0xba, 0xdc, 0x0e};
    ck_assert_mem_eq(packed, want, 6);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 5; i++)
            ck_assert_uint_eq(mj_qref_nibble(packed, 5, r, i), codes[r * 5 + i]);
}
END_TEST

/* ---- weight formats -------------------------------------------------------------------------------- */

static void fill_normalish(float *v, size_t n, uint64_t s, double scale)
{
    for (size_t i = 0; i < n; i++) {
        double sum = 0;
        for (int j = 0; j < 4; j++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            sum += (double)(s >> 11) * 0x1p-53;
        }
        v[i] = (float)((sum - 2.0) * 1.7320508 * scale);
    }
}

static float f32_at(const unsigned char *p, size_t i)
{
    float v;
    memcpy(&v, p + 4 * i, sizeof v);
    return v;
}

START_TEST(w4a16_decodes_hand_built_bytes_with_and_without_zero_points)
{
    /* one row of K = 64, group 32: elements 0 and 1 of group 0 are 15 and 9; group 1 has 0 */
    mj_qref_weights w = {.experts = 1, .rows = 1, .cols = 64};
    unsigned char data[32] = {0x9f}, scale[4], zero[1] = {0x53}; /* zp 3 (group 0), 5 (group 1) */
    uint16_t s0 = mj_half_bf16_from_float(0.5f), s1 = mj_half_bf16_from_float(2.0f);
    memcpy(scale, &s0, 2);
    memcpy(scale + 2, &s1, 2);
    w.data = data;
    w.scale = scale;
    float out[64];
    mj_qref_format f = {MJ_QUANT_W4A16, MJ_DTYPE_BF16, 32, 0};
    ck_assert_int_eq(mj_qref_decode(&f, &w, out), MOEJIT_OK);
    ck_assert_float_eq(out[0], 3.5f);   /* (15 - 8) · 0.5 */
    ck_assert_float_eq(out[1], 0.5f);   /* (9 - 8) · 0.5 */
    ck_assert_float_eq(out[2], -4.0f);  /* (0 - 8) · 0.5 */
    ck_assert_float_eq(out[32], -16.0f); /* (0 - 8) · 2 */
    f.zero_point = 1;
    w.zero = zero;
    ck_assert_int_eq(mj_qref_decode(&f, &w, out), MOEJIT_OK);
    ck_assert_float_eq(out[0], 6.0f);    /* (15 - 3) · 0.5 */
    ck_assert_float_eq(out[1], 3.0f);    /* (9 - 3) · 0.5 */
    ck_assert_float_eq(out[32], -10.0f); /* (0 - 5) · 2 */
}
END_TEST

START_TEST(every_format_decodes_its_own_bytes_to_its_dequantized_values)
{
    const mj_qref_format fmts[] = {
        {MJ_QUANT_BF16, MJ_DTYPE_BF16, 0, 0},     {MJ_QUANT_FP16, MJ_DTYPE_FP16, 0, 0},
        {MJ_QUANT_FP8_TENSOR, MJ_DTYPE_BF16, 0, 0}, {MJ_QUANT_FP8_BLOCK, MJ_DTYPE_BF16, 0, 0},
        {MJ_QUANT_W4A16, MJ_DTYPE_BF16, 32, 0},   {MJ_QUANT_W4A16, MJ_DTYPE_BF16, 64, 1},
        {MJ_QUANT_W4A16, MJ_DTYPE_BF16, 128, 1},  {MJ_QUANT_MXFP4, MJ_DTYPE_BF16, 0, 0},
        {MJ_QUANT_W4A16, MJ_DTYPE_FP16, 64, 0}, /* fp16 scales with dtype=fp16 */
    };
    enum { E = 3, N = 256, K = 384 };
    float *src = malloc(sizeof(float) * E * N * K), *back = malloc(sizeof(float) * E * N * K);
    fill_normalish(src, (size_t)E * N * K, 99, 0.05);
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        mj_qref_weights w;
        ck_assert_int_eq(mj_qref_quantize(&fmts[i], src, E, N, K, &w), MOEJIT_OK);
        ck_assert_int_eq(mj_qref_decode(&fmts[i], &w, back), MOEJIT_OK);
        ck_assert_msg(memcmp(back, w.deq, sizeof(float) * E * N * K) == 0, "format %zu: decode != deq", i);
        /* the quantization is near the source, within the format's half step: fp8 1/16 of
         * the value, int4 amax/14 (symmetric) or range/30, e2m1 2^x (between 4 and 6) where
         * the block's amax exceeds 3 · 2^x, so under a third of it */
        double amax = 0, err = 0;
        for (size_t j = 0; j < (size_t)E * N * K; j++) {
            amax = fmax(amax, fabs(src[j]));
            err = fmax(err, fabs((double)back[j] - src[j]));
        }
        if (fmts[i].quant > MJ_QUANT_FP16) /* a quantizer that copied src would be no test */
            ck_assert_msg(err > 1e-3 * amax, "format %zu: max error only %g", i, err);
        double bar = fmts[i].quant == MJ_QUANT_MXFP4 ? 0.34 : 0.075;
        ck_assert_msg(err < bar * amax, "format %zu: max error %g of amax %g", i, err, amax);
        mj_qref_weights_free(&w);
    }
    free(src);
    free(back);
}
END_TEST

START_TEST(tensor_sizes_follow_the_documented_layouts)
{
    enum { E = 2, N = 256, K = 384 };
    float *src = malloc(sizeof(float) * E * N * K);
    fill_normalish(src, (size_t)E * N * K, 7, 1.0);
    struct {
        mj_qref_format f;
        size_t data, scale, zero;
    } cases[] = {
        {{MJ_QUANT_BF16, MJ_DTYPE_BF16, 0, 0}, 2 * E * N * K, 0, 0},
        {{MJ_QUANT_FP8_TENSOR, MJ_DTYPE_BF16, 0, 0}, E * N * K, 4 * E, 0},
        {{MJ_QUANT_FP8_BLOCK, MJ_DTYPE_BF16, 0, 0}, E * N * K, 4 * E * 2 * 3, 0},
        {{MJ_QUANT_W4A16, MJ_DTYPE_BF16, 32, 0}, E * N * K / 2, 2 * E * N * 12, 0},
        {{MJ_QUANT_W4A16, MJ_DTYPE_BF16, 32, 1}, E * N * K / 2, 2 * E * N * 12, E * N * 6},
        {{MJ_QUANT_W4A16, MJ_DTYPE_BF16, 128, 1}, E * N * K / 2, 2 * E * N * 3, E * N * 2}, /* 3 groups: 2 bytes */
        {{MJ_QUANT_MXFP4, MJ_DTYPE_BF16, 0, 0}, E * N * K / 2, E * N * 12, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mj_qref_weights w;
        ck_assert_int_eq(mj_qref_quantize(&cases[i].f, src, E, N, K, &w), MOEJIT_OK);
        ck_assert_uint_eq(w.data_bytes, cases[i].data);
        ck_assert_uint_eq(w.scale_bytes, cases[i].scale);
        ck_assert_uint_eq(w.zero_bytes, cases[i].zero);
        ck_assert(!cases[i].zero == !w.zero);
        mj_qref_weights_free(&w);
    }
    free(src);
}
END_TEST

START_TEST(misfit_shapes_are_rejected_naming_the_rule)
{
    mj_qref_format blk = {MJ_QUANT_FP8_BLOCK, MJ_DTYPE_BF16, 0, 0};
    ck_assert_int_eq(mj_qref_check_shape(&blk, 256, 200, "w2"), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "multiples of 128"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "w2"));
    mj_qref_format w4 = {MJ_QUANT_W4A16, MJ_DTYPE_BF16, 64, 0};
    ck_assert_int_eq(mj_qref_check_shape(&w4, 8, 96, "w1"), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "group 64"));
    mj_qref_format mx = {MJ_QUANT_MXFP4, MJ_DTYPE_BF16, 0, 0};
    ck_assert_int_eq(mj_qref_check_shape(&mx, 8, 48, "w1"), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(mj_qref_check_shape(&mx, 8, 64, "w1"), MOEJIT_OK);
    ck_assert_int_eq(mj_qref_granule(&w4), 64);
    ck_assert_int_eq(mj_qref_granule(&blk), 128);
}
END_TEST

START_TEST(fp8_block_scales_are_per_128x128_block_in_row_major_block_order)
{
    /* [1, 256, 256]: block (bn, bk) holds one element of magnitude (1 + 2bn + bk) · 448 */
    enum { N = 256, K = 256 };
    float *src = calloc(N * K, sizeof(float));
    for (int bn = 0; bn < 2; bn++)
        for (int bk = 0; bk < 2; bk++) {
            src[(bn * 128 + 5) * K + bk * 128 + 7] = (float)((1 + 2 * bn + bk) * 448);
            src[(bn * 128 + 6) * K + bk * 128 + 9] = -0.75f * (float)(1 + 2 * bn + bk);
        }
    mj_qref_format f = {MJ_QUANT_FP8_BLOCK, MJ_DTYPE_BF16, 0, 0};
    mj_qref_weights w;
    ck_assert_int_eq(mj_qref_quantize(&f, src, 1, N, K, &w), MOEJIT_OK);
    for (int b = 0; b < 4; b++)
        ck_assert_float_eq(f32_at(w.scale, (size_t)b), (float)(b + 1));
    ck_assert_uint_eq(w.data[(128 + 5) * K + 128 + 7], 0x7e); /* 1792 / 4 = 448 */
    ck_assert_float_eq(w.deq[(128 + 6) * K + 128 + 9], -3.0f); /* -3 / 4 = -0.75, exact */
    mj_qref_weights_free(&w);
    /* per-tensor: one scale per expert */
    float two[2 * 16];
    for (int i = 0; i < 16; i++) {
        two[i] = i == 3 ? 448.0f : 1.0f;
        two[16 + i] = i == 3 ? -896.0f : 2.5f;
    }
    mj_qref_format t = {MJ_QUANT_FP8_TENSOR, MJ_DTYPE_BF16, 0, 0};
    ck_assert_int_eq(mj_qref_quantize(&t, two, 2, 2, 8, &w), MOEJIT_OK);
    ck_assert_float_eq(f32_at(w.scale, 0), 1.0f);
    ck_assert_float_eq(f32_at(w.scale, 1), 2.0f);
    ck_assert_uint_eq(w.data[16 + 3], 0xfe);
    ck_assert_float_eq(w.deq[16 + 5], 2.5f); /* 1.25 · 2 */
    mj_qref_weights_free(&w);
    free(src);
}
END_TEST

START_TEST(mxfp4_scale_is_the_smallest_power_of_two_fitting_six)
{
    float src[4 * 32] = {0};
    src[0] = 6.0f;          /* block 0: amax 6 -> 2^0 (s = 127) */
    src[32] = 12.0f;        /* block 1: amax 12 -> 2^1 */
    src[64] = -6.5f;        /* block 2: amax 6.5 -> 2^1; -6.5 / 2 = -3.25 -> -3 -> -6 */
    src[65] = 1.0f;         /*   1 / 2 = 0.5 exactly */
    src[96] = 3.0f;         /* block 3: amax 3 -> 2^-1 */
    src[97] = 0.3f;         /*   0.3 / 0.5 = 0.6 -> 0.5 -> 0.25 */
    mj_qref_format f = {MJ_QUANT_MXFP4, MJ_DTYPE_BF16, 0, 0};
    mj_qref_weights w;
    ck_assert_int_eq(mj_qref_quantize(&f, src, 1, 1, 128, &w), MOEJIT_OK);
    ck_assert_uint_eq(w.scale[0], 127);
    ck_assert_uint_eq(w.scale[1], 128);
    ck_assert_uint_eq(w.scale[2], 128);
    ck_assert_uint_eq(w.scale[3], 126);
    ck_assert_float_eq(w.deq[64], -6.0f);
    ck_assert_float_eq(w.deq[65], 1.0f);
    ck_assert_float_eq(w.deq[96], 3.0f);
    ck_assert_float_eq(w.deq[97], 0.25f);
    ck_assert_uint_eq(w.data[32] & 0xf, 0xd); /* element 64: -3 is code 0xd, low nibble */
    ck_assert_uint_eq(w.data[32] >> 4, 1);    /* element 65: 0.5 is code 1, high nibble */
    mj_qref_weights_free(&w);
}
END_TEST

START_TEST(w4a16_zero_points_vary_and_shift_the_grid)
{
    /* a group of all-positive values cannot use zero point 8: the zero point lands at 0 */
    float src[2 * 32];
    for (int i = 0; i < 32; i++) {
        src[i] = (float)(0.1 * (i % 16));        /* [0, 1.5]: zp 0 */
        src[32 + i] = (float)(-0.1 * (i % 16));  /* [-1.5, 0]: zp 15 */
    }
    mj_qref_format f = {MJ_QUANT_W4A16, MJ_DTYPE_BF16, 32, 1};
    mj_qref_weights w;
    ck_assert_int_eq(mj_qref_quantize(&f, src, 1, 2, 32, &w), MOEJIT_OK);
    ck_assert_uint_eq(mj_qref_nibble(w.zero, 1, 0, 0), 0);
    ck_assert_uint_eq(mj_qref_nibble(w.zero, 1, 1, 0), 15);
    for (int i = 0; i < 64; i++)
        ck_assert_msg(fabs(w.deq[i] - src[i]) <= 0.06, "element %d: %g vs %g", i, w.deq[i], src[i]);
    mj_qref_weights_free(&w);
    /* symmetric (zero_point=0): codes around 8, amax / 7 per group */
    f.zero_point = 0;
    ck_assert_int_eq(mj_qref_quantize(&f, src, 1, 2, 32, &w), MOEJIT_OK);
    ck_assert_ptr_null(w.zero);
    ck_assert_uint_eq(mj_qref_nibble(w.data, 32, 0, 0), 8); /* 0.0 */
    ck_assert_uint_eq(mj_qref_nibble(w.data, 32, 0, 15), 15); /* 1.5 = 7 steps */
    ck_assert_uint_eq(mj_qref_nibble(w.data, 32, 1, 15), 1);  /* -1.5 */
    mj_qref_weights_free(&w);
}
END_TEST

/* ---- fp8 activations ----------------------------------------------------------------------------------- */

START_TEST(fp8_dynamic_scale_is_amax_over_448_in_fp32)
{
    ck_assert_double_eq(mj_ref_fp8_scale(448.0), 1.0);
    ck_assert_double_eq(mj_ref_fp8_scale(896.0), 2.0);
    ck_assert_double_eq(mj_ref_fp8_scale(0.0), 1.0); /* zeros stay zeros */
    ck_assert_double_eq(mj_ref_fp8_scale(1.0), (double)(1.0f / 448.0f));
    ck_assert_double_eq(mj_ref_fp8_scale(3.3), (double)(3.3f / 448.0f));
}
END_TEST

START_TEST(fp8_fake_quant_groups_share_one_scale)
{
    /* one group of 3: scale 2/448; 0.3 · 224 = 67.2 -> 64 (ulp 8 in [64, 128)) */
    double v[3] = {2.0, 1.0, 0.3};
    mj_ref_fp8_fake_quant(v, 3, 3, 0.0);
    double s = (double)(2.0f / 448.0f);
    ck_assert_double_eq(v[0], 448.0 * s);
    ck_assert_double_eq(v[1], 224.0 * s);
    ck_assert_double_eq(v[2], 64.0 * s);
    /* groups of 2 (the last one short): 0.3 gets its own scale and is kept (to fp32) */
    double u[3] = {2.0, 1.0, 0.3};
    mj_ref_fp8_fake_quant(u, 3, 2, 0.0);
    ck_assert_double_eq(u[1], 224.0 * s);
    ck_assert(fabs(u[2] - 0.3) < 1e-7);
    /* a static scale saturates what lies beyond 448 · scale */
    double w[2] = {1000.0, -3.3};
    mj_ref_fp8_fake_quant(w, 2, 2, 1.0);
    ck_assert_double_eq(w[0], 448.0);
    ck_assert_double_eq(w[1], -3.25);
}
END_TEST

/* The kernel computes v / scale in fp32. amax 152: scale = fp32(152/448) is inexact, and
 * 114 · 448/152 = 336 is exactly the midpoint of e4m3's 320 and 352. fp32 rounds the quotient
 * onto 336, and e4m3 rounds that half to even (320, mantissa 010); float64 would keep it a hair
 * above 336 and give 352 — the replay's disagreement with the H200 that failed the suite. */
START_TEST(fp8_fake_quant_divides_in_fp32_like_the_kernel)
{
    float sf = 152.0f / 448.0f;
    ck_assert_float_eq(114.0f / sf, 336.0f);          /* fp32: on the midpoint */
    ck_assert(114.0 / (double)sf != 336.0);           /* float64: off it */
    double v[3] = {152.0, 114.0, -114.0};
    mj_ref_fp8_fake_quant(v, 3, 3, 0.0);
    ck_assert_double_eq(v[0], 448.0 * (double)sf);
    ck_assert_double_eq(v[1], 320.0 * (double)sf);
    ck_assert_double_eq(v[2], -320.0 * (double)sf);
    /* the same with the scale given (static): the same fp32 quotient */
    double u[1] = {114.0};
    mj_ref_fp8_fake_quant(u, 1, 1, (double)sf);
    ck_assert_double_eq(u[0], 320.0 * (double)sf);
}
END_TEST

START_TEST(snapped_fp8_inputs_quantize_losslessly)
{
    enum { T = 5, H = 300 };
    const mj_ref_act_quant modes[3] = {MJ_REF_AQ_FP8_TENSOR, MJ_REF_AQ_FP8_TOKEN, MJ_REF_AQ_FP8_BLOCK};
    for (int m = 0; m < 3; m++) {
        float x[T * H];
        fill_normalish(x, T * H, 11 + m, 1.0);
        for (int h = 0; h < H; h++)
            x[3 * H + h] *= 6.0f; /* one large token */
        mj_qref_fp8_snap_input(x, T, H, modes[m]);
        double q[T * H];
        for (int i = 0; i < T * H; i++) {
            q[i] = x[i];
            ck_assert_float_eq(mj_half_snap(x[i], MJ_DTYPE_BF16), x[i]);
            ck_assert_float_eq(mj_half_snap(x[i], MJ_DTYPE_FP16), x[i]);
        }
        int64_t group = modes[m] == MJ_REF_AQ_FP8_TENSOR ? T * H : modes[m] == MJ_REF_AQ_FP8_TOKEN ? H : 128;
        if (modes[m] == MJ_REF_AQ_FP8_TENSOR)
            mj_ref_fp8_fake_quant(q, T * H, group, 0.0);
        else
            for (int t = 0; t < T; t++)
                mj_ref_fp8_fake_quant(q + t * H, H, group, 0.0);
        for (int i = 0; i < T * H; i++)
            ck_assert_msg(q[i] == (double)x[i], "mode %d element %d: %g -> %g", m, i, x[i], q[i]);
        /* and the group's amax is exactly 448 times a power of two */
        double amax = 0;
        for (int h = 0; h < 128; h++)
            amax = fmax(amax, fabs(x[H + h]));
        if (modes[m] == MJ_REF_AQ_FP8_BLOCK) {
            int e;
            ck_assert_double_eq(frexp(amax / 448.0, &e), 0.5);
        }
    }
    uint8_t b[2];
    const float xs[2] = {448.0f, -0.75f};
    mj_qref_fp8_encode(xs, 2, 0.5, b);
    ck_assert_uint_eq(b[0], 0x7e);                  /* 896 saturates */
    ck_assert_float_eq(mj_half_e4m3_to_float(b[1]), -1.5f);
}
END_TEST

static Suite *quant_ref_suite(void)
{
    Suite *s = suite_create("quant_ref");
    TCase *e4 = tcase_create("e4m3");
    tcase_add_test(e4, e4m3_saturates_at_448);
    tcase_add_test(e4, e4m3_subnormals_are_multiples_of_two_to_minus_nine);
    tcase_add_test(e4, e4m3_rounds_half_to_even);
    tcase_add_test(e4, e4m3_every_byte_round_trips_and_nan_is_0x7f);
    suite_add_tcase(s, e4);
    TCase *el = tcase_create("4-bit and e8m0");
    tcase_add_test(el, e2m1_codes_are_the_contract_table);
    tcase_add_test(el, e8m0_is_a_power_of_two_and_255_is_nan);
    tcase_add_test(el, nibbles_pack_the_even_index_in_the_low_nibble);
    suite_add_tcase(s, el);
    TCase *wt = tcase_create("weights");
    tcase_add_test(wt, w4a16_decodes_hand_built_bytes_with_and_without_zero_points);
    tcase_add_test(wt, every_format_decodes_its_own_bytes_to_its_dequantized_values);
    tcase_add_test(wt, tensor_sizes_follow_the_documented_layouts);
    tcase_add_test(wt, misfit_shapes_are_rejected_naming_the_rule);
    tcase_add_test(wt, fp8_block_scales_are_per_128x128_block_in_row_major_block_order);
    tcase_add_test(wt, mxfp4_scale_is_the_smallest_power_of_two_fitting_six);
    tcase_add_test(wt, w4a16_zero_points_vary_and_shift_the_grid);
    suite_add_tcase(s, wt);
    TCase *aq = tcase_create("fp8 activations");
    tcase_add_test(aq, fp8_dynamic_scale_is_amax_over_448_in_fp32);
    tcase_add_test(aq, fp8_fake_quant_groups_share_one_scale);
    tcase_add_test(aq, fp8_fake_quant_divides_in_fp32_like_the_kernel);
    tcase_add_test(aq, snapped_fp8_inputs_quantize_losslessly);
    suite_add_tcase(s, aq);
    return s;
}

MJ_CHECK_MAIN(quant_ref_suite)
