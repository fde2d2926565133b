/*
 * This file contains the CPU tests of the fp8 encode through a reciprocal (templates/
 * tc_fp8_quant.cuh: Fp8Div, fp8_quotient_fast), which the wgmma fp8 GEMMs' producers use where
 * they quantize 16-bit rows: for a scale s in the fast range, v·r corrected by one fma of its
 * remainder must give every value of the group (|v| <= amax, s = amax / 448) the e4m3 code of
 * the IEEE quotient v / s that the contract names (docs/SEMANTICS.md §5). The mirror below is
 * the device code's arithmetic in C (fp32 products, fmaf, IEEE division); the reference
 * quotient is the double quotient rounded to fp32, which is the correctly rounded fp32
 * quotient (53 >= 2·24 + 2 bits: the double rounding is innocuous), encoded by the contract's
 * rounding (core/halfconv.h: to nearest even, saturated).
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/halfconv.h"
#include "lib/check_main.h"

/* tc_fp8_quant.cuh's Fp8Div and fp8_quotient_fast */
typedef struct {
    float s, r;
    int fast;
} fp8_div;

static fp8_div div_of(float s)
{
    const int fast = s >= 0x1p-60f && s <= 0x1p60f;
    return (fp8_div){s, fast ? 1.0f / s : 0.0f, fast};
}

static float quotient_fast(float v, fp8_div d)
{
    const float q = v * d.r;
    const float q1 = fmaf(fmaf(-d.s, q, v), d.r, q);
    return v == 0.0f ? v : q1;
}

static float value_of(uint16_t h, int fp16) { return fp16 ? mj_half_fp16_to_float(h) : mj_half_bf16_to_float(h); }

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next_u32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* v / s by the mirror against the IEEE quotient: the codes always, the quotient itself too
 * where v and it are at least 2^-100 (below, the remainder or the quotient is subnormal and
 * the quotient may differ in its last bits; it is then far below 2^-10, so its code is a
 * signed zero either way). */
static void expect_same(float v, fp8_div d, long *cases)
{
    const float want = (float)((double)v / (double)d.s), got = quotient_fast(v, d);
    const uint8_t cw = mj_half_e4m3_from_double(want), cg = mj_half_e4m3_from_double(got);
    /* (plain tests: a Check assertion per case would record a checkpoint per case) */
    if (cw != cg)
        ck_abort_msg("s = %a, v = %a: code 0x%02x, the IEEE quotient's 0x%02x", (double)d.s, (double)v, cg, cw);
    if (fabsf(v) >= 0x1p-100f && fabsf(want) >= 0x1p-100f && memcmp(&want, &got, 4) != 0)
        ck_abort_msg("s = %a, v = %a: quotient %a, IEEE %a", (double)d.s, (double)v, (double)got, (double)want);
    (*cases)++;
}

/* Every positive finite bf16 and fp16 amax whose scale is in the fast range: 512 values of
 * its group each (every 16-bit value of the group at every 257th amax), both signs, zeros. */
START_TEST(every_16_bit_amax_encodes_as_the_ieee_quotient)
{
    long cases = 0;
    for (int fp16 = 0; fp16 < 2; fp16++) {
        const uint32_t top = fp16 ? 0x7c00u : 0x7f80u; /* the first infinity */
        for (uint32_t a = 1; a < top; a++) {
            const float amax = value_of((uint16_t)a, fp16);
            const fp8_div d = div_of(amax / 448.0f);
            if (!d.fast) continue;
            const int all = a % 257 == 0;
            for (uint32_t t = 0; t < (all ? 0x10000u : 512u); t++) {
                uint32_t h = all ? t : next_u32() & 0xffffu, mag = h & 0x7fffu;
                if (mag > a) {
                    if (all) continue;
                    mag %= a + 1;
                }
                expect_same(value_of((uint16_t)((h & 0x8000u) | mag), fp16), d, &cases);
            }
        }
    }
    ck_assert(cases > 30000000);
}
END_TEST

/* Scales of every fp32 significand at both ends of the fast range and in its middle, with
 * fp32 values of their groups. */
START_TEST(every_scale_significand_encodes_as_the_ieee_quotient)
{
    long cases = 0;
    static const int exps[3] = {-60, 0, 59};
    for (uint32_t m = 0; m < (1u << 23); m += 3)
        for (int e = 0; e < 3; e++) {
            const uint32_t sb = (uint32_t)(127 + exps[e]) << 23 | m;
            float s;
            memcpy(&s, &sb, 4);
            const fp8_div d = div_of(s);
            if (!d.fast) ck_abort_msg("s = %a must be in the fast range", (double)s);
            const uint32_t vb = (next_u32() & 0x807fffffu) | (uint32_t)(127 + exps[e] + 8 - (int)(next_u32() % 40)) << 23;
            float v;
            memcpy(&v, &vb, 4);
            expect_same(fabsf(v) <= 448.0f * s ? v : v / 1024.0f, d, &cases);
        }
    ck_assert(cases > 8000000);
}
END_TEST

/* Out of the fast range the producers divide; zeros keep their sign on the fast path. */
START_TEST(zeros_keep_their_sign_and_other_scales_divide)
{
    const fp8_div d = div_of(0.5f);
    ck_assert(signbit(quotient_fast(-0.0f, d)) && quotient_fast(-0.0f, d) == 0.0f);
    ck_assert(!signbit(quotient_fast(0.0f, d)));
    ck_assert(!div_of(0.0f).fast && !div_of(NAN).fast && !div_of(INFINITY).fast);
    ck_assert(!div_of(0x1p-61f).fast && !div_of(0x1p61f).fast && div_of(0x1p-60f).fast && div_of(0x1p60f).fast);
}
END_TEST

static Suite *fp8_quotient_suite(void)
{
    Suite *s = suite_create("fp8_quotient");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_16_bit_amax_encodes_as_the_ieee_quotient);
    tcase_add_test(tc, every_scale_significand_encodes_as_the_ieee_quotient);
    tcase_add_test(tc, zeros_keep_their_sign_and_other_scales_divide);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(fp8_quotient_suite)
