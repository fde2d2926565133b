/*
 * This file contains the tests of core/strbuf.c: the exact hex-float form (the basis of
 * every canonical text) and the buffer's growth.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "core/strbuf.h"

static void hex_is(float f, const char *expected)
{
    mj_buf b = MJ_BUF_INIT;
    mj_buf_hexfloat(&b, f);
    ck_assert(mj_buf_ok(&b));
    ck_assert_str_eq(b.data, expected);
    mj_buf_free(&b);
}

START_TEST(hexfloat_prints_exact_known_values)
{
    hex_is(0.0f, "0x0p+0");
    hex_is(-0.0f, "-0x0p+0");
    hex_is(1.0f, "0x1p+0");
    hex_is(-2.5f, "-0x1.4p+1");
    hex_is(7.0f, "0x1.cp+2");
    hex_is(1.702f, "0x1.b3b646p+0");
    hex_is(FLT_MAX, "0x1.fffffep+127");
    hex_is(FLT_MIN, "0x1p-126");
    hex_is(FLT_TRUE_MIN, "0x0.000002p-126");
    hex_is(nextafterf(FLT_MIN, 0.0f), "0x0.fffffep-126");
}
END_TEST

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

START_TEST(hexfloat_round_trips_through_strtof)
{
    uint64_t s = 0x243f6a8885a308d3ull;
    int checked = 0;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint32_t bits = (uint32_t)(s >> 11);
        if (i % 4 == 0) bits &= 0x807fffffu; /* a quarter subnormal (or zero) */
        float f;
        memcpy(&f, &bits, sizeof f);
        if (!isfinite(f)) continue;
        mj_buf b = MJ_BUF_INIT;
        mj_buf_hexfloat(&b, f);
        char *end = NULL;
        float back = strtof(b.data, &end);
        ck_assert_msg(*end == '\0', "strtof stopped early in %s", b.data);
        ck_assert_msg(bits_of(back) == bits, "0x%08x -> %s -> 0x%08x", bits, b.data, bits_of(back));
        mj_buf_free(&b);
        checked++;
    }
    ck_assert_int_gt(checked, 190000);
}
END_TEST

START_TEST(buffer_grows_past_its_first_allocation)
{
    mj_buf b = MJ_BUF_INIT;
    for (int i = 0; i < 1000; i++) mj_buf_printf(&b, "%04d,", i);
    ck_assert(mj_buf_ok(&b));
    ck_assert_uint_eq(b.len, 5000);
    ck_assert_uint_eq(strlen(b.data), 5000);
    ck_assert(b.cap > b.len);
    ck_assert(strncmp(b.data, "0000,0001,", 10) == 0);
    ck_assert_str_eq(b.data + 4995, "0999,");
    /* One printf larger than the current capacity. */
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mj_buf_printf(&b, "[%s]", big);
    ck_assert_uint_eq(b.len, 5000 + 3001);
    ck_assert_int_eq(b.data[b.len - 1], ']');
    mj_buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.data, "");
    mj_buf_puts(&b, "abc");
    char *s = mj_buf_take(&b);
    ck_assert_str_eq(s, "abc");
    ck_assert_ptr_null(b.data);
    free(s);
    /* take on an empty buffer gives an empty string, not NULL. */
    s = mj_buf_take(&b);
    ck_assert_str_eq(s, "");
    free(s);
}
END_TEST

static Suite *strbuf_suite(void)
{
    Suite *s = suite_create("strbuf");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, hexfloat_prints_exact_known_values);
    tcase_add_test(tc, hexfloat_round_trips_through_strtof);
    tcase_add_test(tc, buffer_grows_past_its_first_allocation);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(strbuf_suite)
