/*
 * This file contains the CPU tests of the tensor-core backends' 4-bit weight decoding: the
 * header the kernels compile (templates/common/w4_bits.h) compiled here as C, with its
 * arithmetic half (templates/mma_w4_dequant.cuh: two packed FMAs, the last one rounding to
 * the dtype) mirrored in float64, checked against the contract's decoding as the tests' own
 * codecs write it (tests/lib/quant_ref.c): every nibble in every pair position of a word and
 * in both halves, every zero point, every e8m0 byte, in bf16 and fp16, the one-multiply
 * form of e2m1 pairs the wgmma prefill producer takes where a scale allows it, and the
 * row-scaled form of the bf16 mxfp4 decode GEMMs.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/halfconv.h"
#include "lib/check_main.h"
#include "lib/quant_ref.h"
#include "templates/common/w4_bits.h"

static double half_value(uint32_t bits, int fp16)
{
    return fp16 ? mj_half_fp16_to_float((uint16_t)bits) : mj_half_bf16_to_float((uint16_t)bits);
}

static mj_dtype dtype_of(int fp16) { return fp16 ? MJ_DTYPE_FP16 : MJ_DTYPE_BF16; }

/* Word q with byte b at pair position i and other bytes that differ from it. */
static uint32_t word_with(unsigned b, int i)
{
    uint32_t q = 0x5a3cc3a5u ^ (b * 0x01010101u);
    q &= ~(0xffu << (8 * i));
    return q | ((uint32_t)b << (8 * i));
}

START_TEST(prmt_emulation_matches_the_ptx_definition)
{
    ck_assert_uint_eq(mj_w4_prmt(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
    ck_assert_uint_eq(mj_w4_prmt(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
    ck_assert_uint_eq(mj_w4_prmt(0x33221100u, 0x77665544u, 0x0404u), 0x00440044u);
    ck_assert_uint_eq(mj_w4_prmt(0x33221100u, 0x77665544u, MJ_W4_PAIR_SEL(2)), 0x66662222u);
    /* a selector nibble's bit 3 replicates the picked byte's bit 7 */
    ck_assert_uint_eq(mj_w4_prmt(0x80221100u, 0x7766f544u, 0x8b5du), 0x00fff5ffu);
    ck_assert_uint_eq(mj_w4_prmt(0x33a21100u, 0x77c65544u, MJ_W4_PAIR_SEL_SIGN(2)), 0xffc6ffa2u);
    ck_assert_uint_eq(mj_w4_prmt(0x33a21100u, 0x77c65544u, MJ_W4_PAIR_SEL_SIGN(1)), 0x00550011u);
}
END_TEST

/* int4: each half of pair i is 2^m + its nibble, the low half the even element (the
 * contract's packing, read back by the tests' own nibble reader); minus 2^m + zp it is
 * exactly q − zp for every zp, and times a scale it rounds once like the contract's value. */
START_TEST(int4_pairs_decode_every_nibble_and_zero_point)
{
    static const double scales[] = {1.0, 0.0078125, -0.3359375, 3.1415926};
    for (int fp16 = 0; fp16 <= 1; fp16++)
        for (int i = 0; i < 4; i++)
            for (unsigned b = 0; b < 256; b++) {
                const uint32_t q = word_with(b, i);
                const uint8_t bytes[4] = {q & 0xffu, (q >> 8) & 0xffu, (q >> 16) & 0xffu, q >> 24};
                const uint32_t v = mj_w4_u4_pair(q, q >> 4, i, fp16, 0);
                ck_assert_uint_eq(mj_w4_u4_pair(q, q >> 4, i, fp16, 1), v); /* the lean form: the same bits */
                const double base = fp16 ? 1024.0 : 128.0;
                for (int h = 0; h < 2; h++) {
                    const unsigned n = mj_qref_nibble(bytes, 8, 0, 2 * i + h);
                    ck_assert_double_eq(half_value(v >> (16 * h), fp16), base + n);
                    for (unsigned zp = 0; zp < 16; zp++) {
                        const double diff = half_value(v >> (16 * h), fp16) - half_value(mj_w4_u4_bias(zp, fp16), fp16);
                        ck_assert_double_eq(diff, (double)n - (double)zp);
                        for (size_t s = 0; s < sizeof scales / sizeof scales[0]; s++) {
                            const double sc = mj_half_round_double(scales[s], dtype_of(fp16));
                            ck_assert_double_eq(mj_half_round_double(diff * sc, dtype_of(fp16)),
                                                mj_half_round_double(((double)n - zp) * sc, dtype_of(fp16)));
                        }
                    }
                }
            }
}
END_TEST

/* e2m1: each half of pair i, times the unit 2^126 (bf16) or 2^14 (fp16), is the contract's
 * value of its nibble, sign of zero included. */
START_TEST(e2m1_pairs_decode_every_nibble)
{
    for (int fp16 = 0; fp16 <= 1; fp16++) {
        const double unit = half_value(fp16 ? MJ_W4_E2M1_UNIT_FP16 : MJ_W4_E2M1_UNIT_BF16, fp16);
        ck_assert_double_eq(unit, fp16 ? 16384.0 : ldexp(1.0, 126));
        for (int i = 0; i < 4; i++)
            for (unsigned b = 0; b < 256; b++) {
                const uint32_t q = word_with(b, i);
                const uint8_t bytes[4] = {q & 0xffu, (q >> 8) & 0xffu, (q >> 16) & 0xffu, q >> 24};
                const uint32_t v = mj_w4_e2m1_pair(q, q << 4, i, fp16);
                for (int h = 0; h < 2; h++) {
                    const unsigned n = mj_qref_nibble(bytes, 8, 0, 2 * i + h);
                    const double got = half_value(v >> (16 * h), fp16) * unit, want = mj_qref_e2m1_to_double(n);
                    ck_assert_msg(got == want && signbit(got) == signbit(want),
                                  "fp16=%d pair %d byte 0x%02x half %d: nibble %u decodes to %g, want %g", fp16, i, b,
                                  h, n, got, want);
                }
            }
    }
}
END_TEST

/* e8m0: bf16 holds 2^(s − 127) for every s (s = 0 as a subnormal), fp16 from 2^-24 to 2^15
 * (below: 0, above: infinity, as the documented dequantization into fp16 rounds); 255 is NaN. */
START_TEST(e8m0_scales_decode_every_byte)
{
    for (unsigned s = 0; s < 256; s++) {
        const double want = mj_qref_e8m0_to_double((uint8_t)s);
        const double bf = half_value(mj_w4_e8m0_scale(s, 0), 0), hf = half_value(mj_w4_e8m0_scale(s, 1), 1);
        if (s == 255) {
            ck_assert(isnan(want) && isnan(bf) && isnan(hf));
            continue;
        }
        ck_assert_msg(bf == want, "bf16 e8m0 %u: %g, want %g", s, bf, want);
        const int e = (int)s - 127;
        const double hwant = e > 15 ? INFINITY : e < -24 ? 0.0 : want;
        ck_assert_msg(hf == hwant, "fp16 e8m0 %u: %g, want %g", s, hf, hwant);
    }
}
END_TEST

/* The one-multiply form: for exactly the e8m0 bytes it claims (bf16 1 .. 128, fp16 113 .. 128),
 * every nibble's pattern times the fused factor is the two-multiply form's value, rounded once
 * to the dtype, sign of zero included; the scale of k past K (0) and NaN stay in the two-multiply
 * form. */
START_TEST(e2m1_fused_factor_matches_two_multiplies)
{
    for (int fp16 = 0; fp16 <= 1; fp16++) {
        const double unit = half_value(fp16 ? MJ_W4_E2M1_UNIT_FP16 : MJ_W4_E2M1_UNIT_BF16, fp16);
        int fused = 0;
        for (unsigned e = 0; e < 256; e++) {
            const uint32_t sp = mj_w4_e8m0_scale(e, fp16), s2 = sp << 16 | sp;
            const int want_fusable = fp16 ? e >= 113 && e <= 128 : e >= 1 && e <= 128;
            ck_assert_msg(mj_w4_e8m0_fusable(s2, fp16) == want_fusable, "fp16=%d e8m0 %u: fusable %d, want %d", fp16,
                          e, mj_w4_e8m0_fusable(s2, fp16), want_fusable);
            if (!want_fusable) continue;
            fused++;
            const uint32_t f = mj_w4_e8m0_fused(s2, fp16);
            ck_assert_uint_eq(f >> 16, f & 0xffffu);
            const double fv = half_value(f, fp16);
            ck_assert_double_eq(fv, unit * half_value(sp, fp16));
            for (unsigned n = 0; n < 16; n++) {
                const uint32_t q = n | n << 4;
                const uint32_t v = mj_w4_e2m1_pair(q, q << 4, 0, fp16);
                const double pv = half_value(v, fp16);
                const double one = mj_half_round_double(pv * fv, dtype_of(fp16));
                const double two = mj_half_round_double(mj_half_round_double(pv * unit, dtype_of(fp16)) *
                                                            half_value(sp, fp16),
                                                        dtype_of(fp16));
                ck_assert_msg(one == two && signbit(one) == signbit(two) && one == pv * fv,
                              "fp16=%d e8m0 %u nibble %u: fused %g, two multiplies %g", fp16, e, n, one, two);
                ck_assert_double_eq(two, mj_qref_e2m1_to_double(n) * mj_qref_e8m0_to_double((uint8_t)e));
            }
        }
        ck_assert_int_eq(fused, fp16 ? 16 : 128);
    }
    ck_assert(!mj_w4_e8m0_fusable(0u, 0) && !mj_w4_e8m0_fusable(0u, 1));
}
END_TEST

/* The row-scaled form (bf16): for every largest byte m the form takes and every byte s within
 * its spread, each nibble's pattern times the one factor, rounded once to bf16, is exactly the
 * contract's weight times 2^-R, sign of zero included, and 2^R brings it back; one byte further
 * (a nibble of 0.5 at m − 134) is not exact, and above m = 252 the contract's weights overflow,
 * so the bounds are the tightest; m = 255 makes the row NaN. */
START_TEST(e2m1_row_scaled_factors_keep_the_contract_weights)
{
    long long checked = 0;
    for (unsigned m = 0; m <= MJ_W4_ROW_SCALED_MAX_BYTE; m++) {
        const int R = (int)m - 128;
        const uint32_t bias = mj_w4_row_bias(m);
        uint32_t scale_bits = mj_w4_row_scale_bits(bias);
        float scale;
        memcpy(&scale, &scale_bits, sizeof scale);
        ck_assert_msg((double)scale == ldexp(1.0, R), "m %u: row factor %g, want 2^%d", m, (double)scale, R);
        const unsigned lo = m > MJ_W4_ROW_SCALED_SPREAD ? m - MJ_W4_ROW_SCALED_SPREAD : 0;
        for (unsigned s = lo; s <= m + 1 && s < 256; s++) {
            const int inside = s <= m;
            const uint32_t f = mj_w4_row_factor(s, bias);
            ck_assert_uint_eq(f >> 16, f & 0xffffu);
            if (!inside) continue;
            const double fv = half_value(f, 0);
            ck_assert_double_eq(fv, ldexp(1.0, (int)s - 1 - R));
            for (unsigned n = 0; n < 16; n++) {
                const uint32_t q = n | n << 4;
                const double pv = half_value(mj_w4_e2m1_pair(q, q << 4, 0, 0), 0);
                const double got = mj_half_round_double(pv * fv, MJ_DTYPE_BF16);
                const double weight = mj_qref_e2m1_to_double(n) * mj_qref_e8m0_to_double((uint8_t)s);
                ck_assert_msg(got == ldexp(weight, -R) && signbit(got) == signbit(weight),
                              "m %u byte %u nibble %u: %g, want %g", m, s, n, got, ldexp(weight, -R));
                ck_assert_double_eq(got * (double)scale, mj_half_round_double(weight, MJ_DTYPE_BF16));
                checked++;
            }
        }
        if (m >= MJ_W4_ROW_SCALED_SPREAD + 1) { /* one byte below the spread: 0.5 · 2^(s − 127 − R) = 2^-134 */
            const unsigned s = m - MJ_W4_ROW_SCALED_SPREAD - 1;
            const double pv = half_value(mj_w4_e2m1_pair(1u | 1u << 4, (1u | 1u << 4) << 4, 0, 0), 0);
            const double got = mj_half_round_double(pv * half_value(mj_w4_row_factor(s, bias), 0), MJ_DTYPE_BF16);
            ck_assert_msg(got != ldexp(0.5, (int)s - 127 - R), "m %u byte %u: 2^-134 held exactly", m, s);
        }
    }
    ck_assert_int_eq(checked, 16 * (134 * 135 / 2 + 119 * 134)); /* m = 0..133: m + 1 bytes; 134..252: 134 */
    /* past the largest byte: a contract weight (6 · 2^126) overflows bf16, which the form cannot */
    ck_assert(!isinf(mj_half_round_double(6.0 * mj_qref_e8m0_to_double(MJ_W4_ROW_SCALED_MAX_BYTE), MJ_DTYPE_BF16)));
    ck_assert(isinf(mj_half_round_double(6.0 * mj_qref_e8m0_to_double(MJ_W4_ROW_SCALED_MAX_BYTE + 1), MJ_DTYPE_BF16)));
    uint32_t nan_bits = mj_w4_row_scale_bits(mj_w4_row_bias(255));
    float nan_scale;
    memcpy(&nan_scale, &nan_bits, sizeof nan_scale);
    ck_assert(isnan(nan_scale));
}
END_TEST

static Suite *w4_bits_suite(void)
{
    Suite *s = suite_create("w4_bits");
    TCase *tc = tcase_create("w4_bits");
    tcase_add_test(tc, prmt_emulation_matches_the_ptx_definition);
    tcase_add_test(tc, int4_pairs_decode_every_nibble_and_zero_point);
    tcase_add_test(tc, e2m1_pairs_decode_every_nibble);
    tcase_add_test(tc, e8m0_scales_decode_every_byte);
    tcase_add_test(tc, e2m1_fused_factor_matches_two_multiplies);
    tcase_add_test(tc, e2m1_row_scaled_factors_keep_the_contract_weights);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(w4_bits_suite)
