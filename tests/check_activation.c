/*
 * This file contains the tests of core/activation.c: constructors and defaults, the
 * validation errors and their messages, bit-exact identity (-0.0 vs +0.0, one ulp), and the
 * canonical text round trip over random bit patterns.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/activation.h"
#include "lib/check_main.h"
#include "moejit.h"

/* The canonical text of act (test helper; the value is freed by the caller). */
static char *canon(const moejit_activation *act)
{
    size_t len = 0;
    ck_assert_int_eq(moejit_activation_to_string(act, NULL, 0, &len), MOEJIT_ERR_BUFFER_TOO_SMALL);
    char *s = malloc(len + 1);
    ck_assert_ptr_nonnull(s);
    size_t len2 = 0;
    ck_assert_int_eq(moejit_activation_to_string(act, s, len + 1, &len2), MOEJIT_OK);
    ck_assert_uint_eq(len, len2);
    ck_assert_uint_eq(strlen(s), len);
    return s;
}

static moejit_activation *parse_ok(const char *text)
{
    moejit_activation *a = NULL;
    moejit_status st = moejit_activation_parse(text, &a);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return a;
}

/* Parsing text fails with INVALID_ARGUMENT and a message containing every given part. */
static void parse_fails(const char *text, const char *part1, const char *part2)
{
    moejit_activation *a = (moejit_activation *)0x1;
    ck_assert_int_eq(moejit_activation_parse(text, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(a);
    const char *msg = moejit_last_error();
    ck_assert_msg(strstr(msg, part1), "'%s': message '%s' lacks '%s'", text, msg, part1);
    if (part2) ck_assert_msg(strstr(msg, part2), "'%s': message '%s' lacks '%s'", text, msg, part2);
}

static void check_canon(const moejit_activation *a, const char *expected)
{
    char *s = canon(a);
    ck_assert_str_eq(s, expected);
    free(s);
}

START_TEST(table_lists_ten_kinds_in_abi_order_with_contract_names)
{
    static const struct {
        int abi;
        const char *name;
        int gated;
        int n;
    } want[] = {{0, "gelu", 0, 0},        {1, "relu", 0, 0},       {2, "silu", 0, 0},
                {3, "swiglu", 1, 3},      {4, "geglu", 1, 0},      {6, "relu2", 0, 0},
                {7, "swiglu_step", 1, 1}, {8, "geglu_tanh", 1, 0}, {9, "identity", 0, 0},
                {10, "situ", 1, 3}};
    ck_assert_uint_eq(mj_act_table_len, 10);
    for (size_t i = 0; i < 10; i++) {
        ck_assert_int_eq((int)mj_act_table[i].kind, want[i].abi);
        ck_assert_str_eq(mj_act_table[i].name, want[i].name);
        ck_assert_int_eq(mj_act_table[i].gated, want[i].gated);
        ck_assert_int_eq(mj_act_table[i].n_params, want[i].n);
        ck_assert_ptr_nonnull(mj_act_table[i].formula);
        ck_assert_ptr_eq(mj_act_desc_of(mj_act_table[i].kind), &mj_act_table[i]);
    }
    ck_assert_ptr_null(mj_act_desc_of((moejit_act_kind)5));
    ck_assert_ptr_null(mj_act_desc_of((moejit_act_kind)11));
    ck_assert_ptr_eq(mj_act_desc_by_name("SwiGLU", 6), mj_act_desc_of(MOEJIT_ACT_SWIGLU));
}
END_TEST

START_TEST(create_gives_defaults_for_every_kind)
{
    for (size_t i = 0; i < mj_act_table_len; i++) {
        const mj_act_desc *d = &mj_act_table[i];
        moejit_activation *a = NULL;
        ck_assert_int_eq(moejit_activation_create(d->kind, &a), MOEJIT_OK);
        ck_assert_int_eq(moejit_activation_kind(a), d->kind);
        ck_assert_int_eq(moejit_activation_is_gated(a), d->gated);
        /* The bare name parses to the same value. */
        moejit_activation *b = parse_ok(d->name);
        ck_assert(moejit_activation_equal(a, b));
        moejit_activation_destroy(a);
        moejit_activation_destroy(b);
    }
    moejit_activation *a = (moejit_activation *)0x1;
    ck_assert_int_eq(moejit_activation_create((moejit_act_kind)5, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(a);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "unknown kind 5"));
}
END_TEST

START_TEST(swiglu_defaults_are_canonical_one_zero_fltmax)
{
    moejit_activation *a = NULL;
    ck_assert_int_eq(moejit_activation_create(MOEJIT_ACT_SWIGLU, &a), MOEJIT_OK);
    check_canon(a, "swiglu(alpha=0x1p+0,beta=0x0p+0,limit=0x1.fffffep+127)");
    float v = 0;
    int present = 0;
    ck_assert_int_eq(moejit_activation_param(a, "limit", &v, &present), MOEJIT_OK);
    ck_assert(v == FLT_MAX && present == 1);
    ck_assert_int_eq(moejit_activation_param(a, "alfa", &v, &present), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "allowed: alpha, beta, limit"));
    moejit_activation *b = NULL;
    ck_assert_int_eq(moejit_activation_swiglu(1.0f, 0.0f, FLT_MAX, &b), MOEJIT_OK);
    ck_assert(moejit_activation_equal(a, b));
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);
}
END_TEST

START_TEST(constructors_match_their_parsed_forms)
{
    moejit_activation *a = NULL, *b;
    ck_assert_int_eq(moejit_activation_swiglu(1.702f, 1.0f, 7.0f, &a), MOEJIT_OK);
    b = parse_ok("swiglu(alpha=1.702,beta=1,limit=7)");
    ck_assert(moejit_activation_equal(a, b));
    ck_assert_uint_eq(moejit_activation_hash(a), moejit_activation_hash(b));
    check_canon(a, "swiglu(alpha=0x1.b3b646p+0,beta=0x1p+0,limit=0x1.cp+2)");
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);

    ck_assert_int_eq(moejit_activation_swiglu_step(7.0f, &a), MOEJIT_OK);
    b = parse_ok("swiglu_step");
    ck_assert(moejit_activation_equal(a, b));
    check_canon(a, "swiglu_step(limit=0x1.cp+2)");
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);

    /* SiTU at defaults: linear_scale 25, clamp_limit none. */
    float ls = 25.0f;
    ck_assert_int_eq(moejit_activation_situ(4.0f, &ls, NULL, &a), MOEJIT_OK);
    b = parse_ok("situ");
    ck_assert(moejit_activation_equal(a, b));
    check_canon(a, "situ(gate_scale=0x1p+2,linear_scale=0x1.9p+4,clamp_limit=none)");
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);

    float cl = 10.0f;
    ck_assert_int_eq(moejit_activation_situ(2.0f, NULL, &cl, &a), MOEJIT_OK);
    b = parse_ok("  SITU ( gate_scale = 2 , linear_scale = none , clamp_limit = 0xa.0p0 )  ");
    ck_assert(moejit_activation_equal(a, b));
    float v = -1;
    int present = -1;
    ck_assert_int_eq(moejit_activation_param(a, "linear_scale", &v, &present), MOEJIT_OK);
    ck_assert(present == 0 && v == 0.0f);
    check_canon(a, "situ(gate_scale=0x1p+1,linear_scale=none,clamp_limit=0x1.4p+3)");
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);
}
END_TEST

START_TEST(no_parameter_kinds_print_just_the_name)
{
    moejit_activation *a = parse_ok("relu2()");
    moejit_activation *b = parse_ok(" relu2 ");
    ck_assert(moejit_activation_equal(a, b));
    check_canon(a, "relu2");
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);
}
END_TEST

START_TEST(invalid_values_are_rejected_naming_the_field)
{
    moejit_activation *a = (moejit_activation *)0x1;
    ck_assert_int_eq(moejit_activation_swiglu(1.0f, 0.0f, NAN, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(a);
    ck_assert_str_eq(moejit_last_error(), "activation.limit: must be finite and > 0, got nan");
    ck_assert_int_eq(moejit_activation_swiglu(INFINITY, 0.0f, 7.0f, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "activation.alpha: must be finite, got inf");
    ck_assert_int_eq(moejit_activation_swiglu(1.0f, -INFINITY, 7.0f, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "activation.beta: must be finite, got -inf");
    ck_assert_int_eq(moejit_activation_swiglu_step(0.0f, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "activation.limit: must be finite and > 0, got 0");
    ck_assert_int_eq(moejit_activation_swiglu_step(-1.0f, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "activation.limit: must be finite and > 0, got -1");
    ck_assert_int_eq(moejit_activation_situ(0.0f, NULL, NULL, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "activation.gate_scale: must be finite and > 0, got 0");
    float neg = -2.0f;
    ck_assert_int_eq(moejit_activation_situ(4.0f, NULL, &neg, &a), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(
        strstr(moejit_last_error(), "activation.clamp_limit: must be finite and > 0, or none"));

    parse_fails("swiglu(limit=nan)", "activation.limit", "got nan");
    parse_fails("swiglu(alpha=inf)", "activation.alpha", "must be finite");
    parse_fails("swiglu(beta=-inf)", "activation.beta", "must be finite");
    parse_fails("swiglu(limit=0)", "activation.limit", "> 0");
    parse_fails("swiglu_step(limit=-1)", "activation.limit", "got -1");
    parse_fails("situ(gate_scale=0)", "activation.gate_scale", "> 0");
    /* strtof's ERANGE overflow to inf is not a value. */
    parse_fails("swiglu(alpha=1e39)", "activation.alpha: must be finite", "1e39");
    parse_fails("swiglu(limit=none)", "activation.limit: none is not allowed", NULL);
    parse_fails("swiglu(alpha=1.7x)", "activation.alpha: '1.7x' is not a number", NULL);
    parse_fails("swiglu(alpha=)", "activation.alpha", "not a number");
    parse_fails("swiglu(alpha)", "activation.alpha: missing value", NULL);
}
END_TEST

START_TEST(foreign_misspelt_duplicate_and_unknown_are_errors)
{
    parse_fails("relu2(alpha=1)",
                "activation relu2: unknown parameter 'alpha'; relu2 takes no parameters", NULL);
    parse_fails("swiglu(alfa=1)",
                "activation swiglu: unknown parameter 'alfa'; allowed: alpha, beta, limit", NULL);
    parse_fails("swiglu_step(alpha=1)", "unknown parameter 'alpha'; allowed: limit", NULL);
    parse_fails("situ(limit=1)", "allowed: gate_scale, linear_scale, clamp_limit", NULL);
    parse_fails("swiglu(alpha=1,alpha=2)", "activation swiglu: duplicate parameter 'alpha'", NULL);
    parse_fails("swiglo",
                "activation: unknown kind 'swiglo'; allowed: gelu, relu, silu, swiglu, geglu, "
                "relu2, swiglu_step, geglu_tanh, identity, situ",
                NULL);
    parse_fails("", "activation: expected a kind name", "allowed: gelu");
    parse_fails("swiglu(alpha=1", "activation swiglu: unexpected", NULL);
    parse_fails("swiglu(alpha=1,)", "empty parameter", NULL);
    parse_fails("swiglu x", "unexpected 'x'", NULL);
}
END_TEST

START_TEST(negative_zero_differs_from_positive_zero)
{
    moejit_activation *p = NULL, *n = NULL;
    ck_assert_int_eq(moejit_activation_swiglu(1.0f, 0.0f, 7.0f, &p), MOEJIT_OK);
    ck_assert_int_eq(moejit_activation_swiglu(1.0f, -0.0f, 7.0f, &n), MOEJIT_OK);
    ck_assert(!moejit_activation_equal(p, n));
    ck_assert_uint_ne(moejit_activation_hash(p), moejit_activation_hash(n));
    char *cp = canon(p), *cn = canon(n);
    ck_assert_str_ne(cp, cn);
    ck_assert_ptr_nonnull(strstr(cn, "beta=-0x0p+0"));
    /* And the text form keeps the sign. */
    moejit_activation *r = parse_ok(cn);
    ck_assert(moejit_activation_equal(r, n));
    moejit_activation_destroy(r);
    free(cp);
    free(cn);
    moejit_activation_destroy(p);
    moejit_activation_destroy(n);
}
END_TEST

START_TEST(values_one_ulp_apart_are_distinct)
{
    float base = 1.702f;
    float next = nextafterf(base, 2.0f);
    moejit_activation *a = NULL, *b = NULL;
    ck_assert_int_eq(moejit_activation_swiglu(base, 0.0f, 7.0f, &a), MOEJIT_OK);
    ck_assert_int_eq(moejit_activation_swiglu(next, 0.0f, 7.0f, &b), MOEJIT_OK);
    ck_assert(!moejit_activation_equal(a, b));
    ck_assert_uint_ne(moejit_activation_hash(a), moejit_activation_hash(b));
    char *ca = canon(a), *cb = canon(b);
    ck_assert_str_ne(ca, cb);
    free(ca);
    free(cb);
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);

    ck_assert_int_eq(moejit_activation_swiglu_step(7.0f, &a), MOEJIT_OK);
    ck_assert_int_eq(moejit_activation_swiglu_step(nextafterf(7.0f, 0.0f), &b), MOEJIT_OK);
    ck_assert(!moejit_activation_equal(a, b));
    ck_assert_uint_ne(moejit_activation_hash(a), moejit_activation_hash(b));
    moejit_activation_destroy(a);
    moejit_activation_destroy(b);
}
END_TEST

START_TEST(human_decimal_parses_to_the_float_constructor_value)
{
    moejit_activation *a = parse_ok("swiglu(alpha=1.702)");
    float v;
    int present;
    ck_assert_int_eq(moejit_activation_param(a, "alpha", &v, &present), MOEJIT_OK);
    ck_assert(memcmp(&v, &(float){1.702f}, sizeof v) == 0);
    ck_assert_int_eq(moejit_activation_param(a, "beta", &v, &present), MOEJIT_OK);
    ck_assert(v == 0.0f && !signbit(v));
    moejit_activation_destroy(a);
}
END_TEST

/* A deterministic xorshift, so a failure reproduces. */
static uint32_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

static float random_float(uint64_t *s, int positive)
{
    for (;;) {
        uint32_t bits = rng_next(s);
        /* One in eight draws is a subnormal, so they are well covered. */
        if ((bits & 7) == 0) bits &= 0x807fffffu;
        if (positive) bits &= 0x7fffffffu;
        float f;
        memcpy(&f, &bits, sizeof f);
        if (isfinite(f) && (!positive || f > 0.0f)) return f;
    }
}

START_TEST(canonical_text_round_trips_random_bit_patterns_exactly)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int subnormals = 0;
    for (int i = 0; i < 12000; i++) {
        moejit_activation *a = NULL;
        switch (i % 3) {
        case 0:
            ck_assert_int_eq(moejit_activation_swiglu(random_float(&seed, 0), random_float(&seed, 0),
                                                      random_float(&seed, 1), &a),
                             MOEJIT_OK);
            break;
        case 1:
            ck_assert_int_eq(moejit_activation_swiglu_step(random_float(&seed, 1), &a), MOEJIT_OK);
            break;
        default: {
            float ls = random_float(&seed, 1), cl = random_float(&seed, 1);
            ck_assert_int_eq(moejit_activation_situ(random_float(&seed, 1), (i & 4) ? &ls : NULL,
                                                    (i & 8) ? &cl : NULL, &a),
                             MOEJIT_OK);
        }
        }
        for (int k = 0; k < MJ_ACT_MAX_PARAMS; k++)
            if (a->present[k] && fpclassify(a->value[k]) == FP_SUBNORMAL) subnormals++;
        char *s = canon(a);
        moejit_activation *b = parse_ok(s);
        ck_assert_msg(moejit_activation_equal(a, b), "round trip of %s", s);
        ck_assert_uint_eq(moejit_activation_hash(a), moejit_activation_hash(b));
        char *s2 = canon(b);
        ck_assert_str_eq(s, s2);
        free(s);
        free(s2);
        moejit_activation_destroy(a);
        moejit_activation_destroy(b);
    }
    ck_assert_int_gt(subnormals, 100);
}
END_TEST

START_TEST(to_string_reports_small_buffers)
{
    moejit_activation *a = parse_ok("relu");
    char buf[4] = "xyz";
    size_t len = 0;
    ck_assert_int_eq(moejit_activation_to_string(a, buf, sizeof buf, &len), MOEJIT_ERR_BUFFER_TOO_SMALL);
    ck_assert_uint_eq(len, 4);
    ck_assert_str_eq(buf, "xyz");
    char big[5];
    ck_assert_int_eq(moejit_activation_to_string(a, big, sizeof big, NULL), MOEJIT_OK);
    ck_assert_str_eq(big, "relu");
    moejit_activation_destroy(a);
    moejit_activation_destroy(NULL);
}
END_TEST

static Suite *activation_suite(void)
{
    Suite *s = suite_create("activation");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, table_lists_ten_kinds_in_abi_order_with_contract_names);
    tcase_add_test(tc, create_gives_defaults_for_every_kind);
    tcase_add_test(tc, swiglu_defaults_are_canonical_one_zero_fltmax);
    tcase_add_test(tc, constructors_match_their_parsed_forms);
    tcase_add_test(tc, no_parameter_kinds_print_just_the_name);
    tcase_add_test(tc, invalid_values_are_rejected_naming_the_field);
    tcase_add_test(tc, foreign_misspelt_duplicate_and_unknown_are_errors);
    tcase_add_test(tc, negative_zero_differs_from_positive_zero);
    tcase_add_test(tc, values_one_ulp_apart_are_distinct);
    tcase_add_test(tc, human_decimal_parses_to_the_float_constructor_value);
    tcase_add_test(tc, canonical_text_round_trips_random_bit_patterns_exactly);
    tcase_add_test(tc, to_string_reports_small_buffers);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(activation_suite)
