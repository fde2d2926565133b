/*
 * This file contains the tests of core/spec.c: defaults, the canonical form and its
 * idempotence, text and JSON readers agreeing, the validity rules and their messages, and
 * arch=native resolution (an error on a machine without a GPU).
 */
#include <check.h>
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/driver.h"
#include "lib/check_main.h"
#include "moejit.h"
#include "core/matrix.h"
#include "core/spec.h"
#include "core/status.h"

#define SWIGLU_DEFAULT "swiglu(alpha=0x1p+0,beta=0x0p+0,limit=0x1.fffffep+127)"
#define TAIL_DEFAULT \
    "logits=fp32,w1_layout=up_gate,bias=none,hidden=0,inter=0,experts=0,topk=0,tile=auto"

static moejit_spec *parse_ok(const char *text)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse(text, &s);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

static moejit_spec *json_ok(const char *json)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_from_json(json, &s);
    ck_assert_msg(st == MOEJIT_OK, "json '%s': %s", json, moejit_last_error());
    return s;
}

static void check_canonical(const char *text, const char *expected)
{
    moejit_spec *s = parse_ok(text);
    ck_assert_str_eq(moejit_spec_canonical(s), expected);
    moejit_spec_destroy(s);
}

static void expect_error(moejit_status got, moejit_status want, const char *what, const char *part)
{
    ck_assert_msg(got == want, "%s: status %s, want %s (%s)", what, moejit_status_name(got),
                  moejit_status_name(want), moejit_last_error());
    ck_assert_msg(strstr(moejit_last_error(), part), "%s: message '%s' lacks '%s'", what,
                  moejit_last_error(), part);
}

static void parse_fails(const char *text, const char *part)
{
    moejit_spec *s = (moejit_spec *)0x1;
    expect_error(moejit_spec_parse(text, &s), MOEJIT_ERR_INVALID_ARGUMENT, text, part);
    ck_assert_ptr_null(s);
}

static void json_fails(const char *json, const char *part)
{
    moejit_spec *s = (moejit_spec *)0x1;
    expect_error(moejit_spec_from_json(json, &s), MOEJIT_ERR_INVALID_ARGUMENT, json, part);
    ck_assert_ptr_null(s);
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Specs covering every optional group of the canonical form. */
static const char *const samples[] = {
    "arch=sm_80",
    "backend=simt,quant=fp16,act=gelu,arch=sm_86,routing=softmax_topk,hidden=4096,inter=1536",
    "quant=w4a16,group=64,zero_point=1,dtype=fp16,act=relu2,arch=sm_89,bias=both",
    "backend=wgmma,quant=fp8_block,arch=sm_90a,routing=deepseek_v3,n_group=8,topk_group=4,"
    "routed_scaling=2.5,experts=256,topk=8,logits=bf16,w1_layout=interleaved",
    "act=situ(gate_scale=3,linear_scale=none,clamp_limit=7),arch=sm_120a,tile=m64n128_k32",
    "act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_100a,routing=precomputed,w1_layout=gate_up",
    "backend=mma,act=swiglu_step,arch=sm_90a,bias=b2,act_overrides=per_expert",
};

/* act_overrides appears in the canonical text only where set (as group or fp8_act), so a
 * spec without overrides keeps the text, hence the key, it had; a bad value names the field. */
START_TEST(act_overrides_is_printed_only_where_set)
{
    moejit_spec *a = parse_ok("arch=sm_90a,act_overrides=none");
    ck_assert_ptr_null(strstr(moejit_spec_canonical(a), "act_overrides"));
    moejit_spec *b = parse_ok("arch=sm_90a,act_overrides=per_expert");
    ck_assert_ptr_nonnull(strstr(moejit_spec_canonical(b), ",bias=none,act_overrides=per_expert,hidden=0,"));
    ck_assert(!moejit_spec_equal(a, b));
    moejit_spec_destroy(a);
    moejit_spec_destroy(b);
    moejit_spec *c = NULL;
    ck_assert_int_eq(moejit_spec_parse("arch=sm_90a,act_overrides=yes", &c), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "act_overrides"));
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "per_expert"));
}
END_TEST

START_TEST(defaults_fill_every_field)
{
    check_canonical("arch=sm_90a", "backend=simt,quant=bf16,dtype=bf16,act=" SWIGLU_DEFAULT
                                   ",arch=sm_90a,routing=renormalize," TAIL_DEFAULT);
    /* fp16 weights default to fp16 activations. */
    check_canonical("quant=fp16,arch=sm_80", "backend=simt,quant=fp16,dtype=fp16,act=" SWIGLU_DEFAULT
                                             ",arch=sm_80,routing=renormalize," TAIL_DEFAULT);
    check_canonical("quant=w4a16,arch=sm_80",
                    "backend=simt,quant=w4a16,group=128,zero_point=0,dtype=bf16,act=" SWIGLU_DEFAULT
                    ",arch=sm_80,routing=renormalize," TAIL_DEFAULT);
    check_canonical(
        "routing=deepseek_v3,arch=sm_80",
        "backend=simt,quant=bf16,dtype=bf16,act=" SWIGLU_DEFAULT
        ",arch=sm_80,routing=deepseek_v3,n_group=1,topk_group=1,routed_scaling=0x1p+0," TAIL_DEFAULT);
}
END_TEST

START_TEST(fields_in_any_order_with_spaces_give_one_canonical)
{
    moejit_spec *a =
        parse_ok("backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a");
    moejit_spec *b =
        parse_ok("  arch = sm_90a , act = swiglu( limit=7, alpha=1.702 ,beta=1 ) ,quant=bf16 ");
    ck_assert_str_eq(moejit_spec_canonical(a), moejit_spec_canonical(b));
    ck_assert(moejit_spec_equal(a, b));
    ck_assert_uint_eq(a->hash, b->hash);
    ck_assert_uint_eq(a->hash, fnv1a(moejit_spec_canonical(a)));
    ck_assert_ptr_nonnull(
        strstr(moejit_spec_canonical(a), "act=swiglu(alpha=0x1.b3b646p+0,beta=0x1p+0,limit=0x1.cp+2)"));
    moejit_spec *c = parse_ok("arch=sm_90a,act=swiglu(alpha=1.702,beta=1,limit=8)");
    ck_assert(!moejit_spec_equal(a, c));
    ck_assert_uint_ne(a->hash, c->hash);
    moejit_spec_destroy(a);
    moejit_spec_destroy(b);
    moejit_spec_destroy(c);
}
END_TEST

START_TEST(canonical_text_parses_back_to_itself)
{
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        moejit_spec *a = parse_ok(samples[i]);
        moejit_spec *b = parse_ok(moejit_spec_canonical(a));
        ck_assert_str_eq(moejit_spec_canonical(a), moejit_spec_canonical(b));
        ck_assert(moejit_spec_equal(a, b));
        moejit_spec *c = NULL;
        ck_assert_int_eq(mj_spec_clone(b, &c), MOEJIT_OK);
        ck_assert_ptr_ne(c->canonical, b->canonical);
        ck_assert(moejit_spec_equal(a, c));
        ck_assert(moejit_activation_equal(moejit_spec_activation(a), moejit_spec_activation(c)));
        moejit_spec_destroy(a);
        moejit_spec_destroy(b);
        moejit_spec_destroy(c);
    }
}
END_TEST

START_TEST(json_and_text_forms_canonicalise_alike)
{
    moejit_spec *t = parse_ok(
        "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a,hidden=2048");
    moejit_spec *j1 = json_ok(
        "{\"backend\":\"simt\",\"quant\":\"bf16\",\"act\":\"swiglu(alpha=1.702,beta=1,limit=7)\","
        "\"arch\":\"sm_90a\",\"hidden\":2048}");
    moejit_spec *j2 = json_ok(
        "{\"arch\":\"sm_90a\",\"hidden\":\"2048\",\"act\":{\"kind\":\"swiglu\",\"alpha\":\"1.702\","
        "\"beta\":1,\"limit\":7}}");
    /* A JSON number goes through double; for 1.702 the result is still the float 1.702f. */
    moejit_spec *j3 =
        json_ok("{\"arch\":\"sm_90a\",\"hidden\":2048,\"act\":{\"kind\":\"swiglu\",\"alpha\":1.702,"
                "\"beta\":\"0x1p+0\",\"limit\":7.0}}");
    ck_assert_str_eq(moejit_spec_canonical(t), moejit_spec_canonical(j1));
    ck_assert_str_eq(moejit_spec_canonical(t), moejit_spec_canonical(j2));
    ck_assert_str_eq(moejit_spec_canonical(t), moejit_spec_canonical(j3));
    moejit_spec_destroy(t);
    moejit_spec_destroy(j1);
    moejit_spec_destroy(j2);
    moejit_spec_destroy(j3);

    /* SiTU's optional parameters: null and "none" both mean none. */
    moejit_spec *s1 = parse_ok("arch=sm_80,act=situ(linear_scale=none)");
    moejit_spec *s2 = json_ok("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"situ\",\"linear_scale\":null}}");
    moejit_spec *s3 =
        json_ok("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"situ\",\"linear_scale\":\"none\"}}");
    ck_assert_str_eq(moejit_spec_canonical(s1), moejit_spec_canonical(s2));
    ck_assert_str_eq(moejit_spec_canonical(s1), moejit_spec_canonical(s3));
    moejit_spec_destroy(s1);
    moejit_spec_destroy(s2);
    moejit_spec_destroy(s3);
}
END_TEST

START_TEST(to_json_round_trips_and_uses_numbers_for_integers)
{
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
        moejit_spec *a = parse_ok(samples[i]);
        size_t len = 0;
        ck_assert_int_eq(moejit_spec_to_json(a, NULL, 0, &len), MOEJIT_ERR_BUFFER_TOO_SMALL);
        char *buf = malloc(len + 1);
        ck_assert_int_eq(moejit_spec_to_json(a, buf, len + 1, NULL), MOEJIT_OK);
        ck_assert_uint_eq(strlen(buf), len);
        cJSON *root = cJSON_Parse(buf);
        ck_assert_ptr_nonnull(root);
        ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(root, "hidden")));
        ck_assert(cJSON_IsString(cJSON_GetObjectItem(root, "act")));
        ck_assert_int_eq(cJSON_GetObjectItem(root, "hidden")->valueint, a->hidden);
        cJSON_Delete(root);
        moejit_spec *b = json_ok(buf);
        ck_assert_msg(moejit_spec_equal(a, b), "%s -> %s -> %s", moejit_spec_canonical(a), buf,
                      moejit_spec_canonical(b));
        free(buf);
        moejit_spec_destroy(a);
        moejit_spec_destroy(b);
    }
}
END_TEST

START_TEST(unknown_duplicate_and_foreign_fields_are_errors)
{
    parse_fails("arch=sm_80,foo=1",
                "spec: unknown field 'foo'; allowed: backend, quant, group, zero_point, dtype, act");
    parse_fails("arch=sm_80,quant=bf16,quant=fp16", "spec: duplicate field 'quant'");
    parse_fails("arch=sm_80,group=64", "group: only valid with quant=w4a16");
    parse_fails("arch=sm_80,zero_point=1", "zero_point: only valid with quant=w4a16");
    parse_fails("arch=sm_80,n_group=8", "n_group: only valid with routing=deepseek_v3");
    parse_fails("arch=sm_80,routing=renormalize,routed_scaling=2",
                "routed_scaling: only valid with routing=deepseek_v3");
    parse_fails("arch=sm_80,quant=w4a16,group=48", "group: must be 32, 64 or 128, got 48");
    parse_fails("arch=sm_80,routing=deepseek_v3,n_group=4,topk_group=5",
                "topk_group: must be 1..n_group");
    parse_fails("arch=sm_80,routing=deepseek_v3,routed_scaling=0",
                "routed_scaling: must be finite and > 0");
    parse_fails("arch=sm_80,backend=cutlass",
                "backend: unknown value 'cutlass'; allowed: simt, mma, wgmma");
    parse_fails("arch=sm_75",
                "arch: unknown value 'sm_75'; allowed: sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a");
    parse_fails("arch=sm_80,act=swiglu(alfa=1)", "activation swiglu: unknown parameter 'alfa'");
    parse_fails("arch=sm_80,act=swiglu(alpha=1", "spec: unbalanced parentheses");
    parse_fails("arch=sm_80,,quant=bf16", "spec: empty field");
    parse_fails("arch=sm_80,quant", "spec: field 'quant' has no value");
    parse_fails("arch=sm_80,hidden=12x", "hidden: expected an integer, got '12x'");
}
END_TEST

START_TEST(validity_rules_name_the_field)
{
    parse_fails("arch=sm_80,hidden=100", "hidden: must be a multiple of 8 and >= 0");
    parse_fails("arch=sm_80,inter=-8", "inter: must be a multiple of 8 and >= 0");
    parse_fails("arch=sm_80,experts=513", "experts: must be 0..512");
    parse_fails("arch=sm_80,topk=33", "topk: must be 0..32");
    parse_fails("arch=sm_80,experts=4,topk=8", "topk: must be <= experts (4), got 8");
    parse_fails("arch=sm_80,quant=bf16,dtype=fp16", "dtype: quant=bf16 needs dtype=bf16, got fp16");
    parse_fails("arch=sm_80,quant=fp16,dtype=bf16", "dtype: quant=fp16 needs dtype=fp16, got bf16");
    parse_fails("arch=sm_80,quant=fp8_tensor,dtype=fp32",
                "dtype: quant=fp8_tensor needs dtype bf16 or fp16");
    parse_fails("arch=sm_80,logits=fp16", "logits: must be fp32 or bf16");
    parse_fails("arch=sm_80,tile=Big", "tile: must be auto or a name of [a-z0-9_]");
    parse_fails("arch=sm_80,tile=abcdefghijabcdefghijabcdefghij_xy", "tile: must be auto");
    check_canonical(
        "arch=sm_80,quant=w4a16,dtype=fp16,hidden=4104,inter=8,experts=512,topk=32,logits=bf16,"
        "tile=abcdefghijabcdefghijabcdefghij_",
        "backend=simt,quant=w4a16,group=128,zero_point=0,dtype=fp16,act=" SWIGLU_DEFAULT
        ",arch=sm_80,routing=renormalize,logits=bf16,w1_layout=up_gate,bias=none,hidden=4104,"
        "inter=8,experts=512,topk=32,tile=abcdefghijabcdefghijabcdefghij_");
}
END_TEST

START_TEST(json_reader_rejects_wrong_types_and_keys)
{
    json_fails("{\"arch\":\"sm_80\",\"hidden\":true}", "hidden: expected an integer, got a boolean");
    json_fails("{\"arch\":\"sm_80\",\"hidden\":8.5}", "hidden: expected an integer, got 8.5");
    json_fails("{\"arch\":\"sm_80\",\"backend\":3}",
               "backend: expected a string (one of simt, mma, wgmma), got a number");
    json_fails("{\"arch\":\"sm_80\",\"colour\":\"red\"}",
               "spec: unknown field 'colour'; allowed: backend");
    json_fails("{\"arch\":\"sm_80\",\"quant\":\"bf16\",\"quant\":\"fp16\"}",
               "spec: duplicate field 'quant'");
    json_fails("{\"arch\":\"sm_80\",", "spec json: invalid JSON");
    json_fails("[1,2]", "spec json: expected an object, got an array");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglu\",\"alfa\":1}}",
               "activation swiglu: unknown parameter 'alfa'");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"relu2\",\"alpha\":1}}",
               "relu2 takes no parameters");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglo\"}}",
               "act.kind: unknown kind 'swiglo'; allowed: gelu");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglu\",\"limit\":\"nan\"}}",
               "activation.limit: must be finite and > 0, got nan");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglu\",\"alpha\":1e300}}",
               "activation.alpha: 1e+300 is beyond float range");
    json_fails("{\"arch\":\"sm_80\",\"act\":[1]}", "act: expected a string");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"alpha\":1}}", "act.kind: missing or not a string; allowed: gelu");
}
END_TEST

/* A value is read exactly or refused: never cut at a NUL, never silently zero, never the first
 * of two. */
START_TEST(values_are_read_exactly_or_refused)
{
    json_fails("{\"arch\":\"sm_80\",\"backend\":\"simt\\u0000mma\"}", "spec json: a string holds \\u0000 at offset");
    json_fails("{\"arch\":\"sm_80\",\"act\":\"swiglu(alpha=2)\\u0000,beta=3\"}", "\\u0000");
    json_fails("{\"arch\":\"sm_80\",\"back\\u0000end\":\"simt\"}", "\\u0000");
    /* An escaped backslash before "u0000" is text, not a NUL: the field's own check answers. */
    json_fails("{\"arch\":\"sm_80\",\"backend\":\"x\\\\u0000\"}", "backend: unknown value");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglu\",\"kind\":\"gelu\"}}",
               "activation swiglu: duplicate parameter 'kind'");
    parse_fails("arch=sm_80,act=swiglu(alpha=1e-46)", "activation.alpha:");
    parse_fails("arch=sm_80,act=swiglu(alpha=1e-46)", "underflows to zero");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglu\",\"alpha\":1e-46}}",
               "activation.alpha: 1e-46 is a nonzero value that underflows to zero");
    json_fails("{\"arch\":\"sm_80\",\"act\":{\"kind\":\"swiglu\",\"alpha\":\"1e-46\"}}", "underflows to zero");
    parse_fails("arch=sm_80,routing=deepseek_v3,routed_scaling=1e-60", "routed_scaling: '1e-60' is a nonzero value");
    parse_fails("arch=sm_80,act=swiglu(alpha=1e39)", "beyond float range");
    /* Zero written as zero, and the smallest subnormal, are still values. */
    moejit_spec_destroy(parse_ok("arch=sm_80,act=swiglu(beta=0e10)"));
    moejit_spec_destroy(parse_ok("arch=sm_80,act=swiglu(beta=0x1p-149)"));
    ck_assert_int_eq(mj_json_nul_escape("{\"a\":\"b\"}"), -1);
    ck_assert_int_eq(mj_json_nul_escape("{\"a\":\"\\u0000\"}"), 6);
    ck_assert_int_eq(mj_json_nul_escape("{\"a\":\"\\\"\\u0000\"}"), 8);
}
END_TEST

/* backend=auto is resolved into the canonical form: the fastest backend whose declared support
 * covers the spec and has been validated on hardware, for every quant, routing, layout, bias
 * and arch. */
START_TEST(auto_backend_is_the_fastest_that_supports_the_spec)
{
    moejit_spec *s = parse_ok("backend=auto,arch=sm_90a");
    ck_assert_int_eq(s->backend, MJ_BACKEND_WGMMA);
    ck_assert_int_eq(s->backend_auto, 1);
    ck_assert_msg(strncmp(moejit_spec_canonical(s), "backend=wgmma,", 14) == 0, "%s", moejit_spec_canonical(s));
    moejit_spec *e = parse_ok("backend=wgmma,arch=sm_90a");
    ck_assert(moejit_spec_equal(s, e));
    ck_assert_int_eq(e->backend_auto, 0);
    moejit_spec_destroy(e);
    moejit_spec_destroy(s);
    s = json_ok("{\"backend\":\"auto\",\"arch\":\"sm_80\",\"quant\":\"fp16\",\"dtype\":\"fp16\"}");
    ck_assert_int_eq(s->backend, MJ_BACKEND_MMA);
    moejit_spec_destroy(s);

    static const mj_backend order[] = {MJ_BACKEND_WGMMA, MJ_BACKEND_MMA, MJ_BACKEND_SIMT};
    static const char *const quants[] = {"quant=bf16", "quant=fp16,dtype=fp16", "quant=fp8_tensor", "quant=fp8_block",
                                         "quant=w4a16", "quant=mxfp4"};
    int checked = 0;
    for (size_t q = 0; q < sizeof quants / sizeof quants[0]; q++)
        for (int r = 0; r < MJ_ROUTING_COUNT; r++)
            for (int l = 0; l < MJ_W1_LAYOUT_COUNT; l++)
                for (int b = 0; b < MJ_BIAS_COUNT; b++)
                    for (int a = 0; a < MJ_ARCH_COUNT; a++) {
                        char text[256];
                        snprintf(text, sizeof text, "backend=auto,%s,routing=%s,w1_layout=%s,bias=%s,arch=%s", quants[q],
                                 mj_routing_names[r], mj_w1_layout_names[l], mj_bias_names[b], mj_arch_names[a]);
                        moejit_spec *got = parse_ok(text);
                        ck_assert_int_eq(mj_check_support(got), MOEJIT_OK);
                        ck_assert_int_eq(mj_check_validated(got, 0), MOEJIT_OK);
                        moejit_spec probe = *got;
                        for (size_t i = 0; order[i] != got->backend; i++) {
                            probe.backend = order[i];
                            ck_assert_msg(mj_check_support(&probe) != MOEJIT_OK ||
                                              mj_check_validated(&probe, 0) != MOEJIT_OK,
                                          "%s: auto chose %s over %s", text, mj_backend_names[got->backend],
                                          mj_backend_names[order[i]]);
                        }
                        moejit_spec_destroy(got);
                        checked++;
                    }
    ck_assert_int_eq(checked, 6 * MJ_ROUTING_COUNT * MJ_W1_LAYOUT_COUNT * MJ_BIAS_COUNT * MJ_ARCH_COUNT);
}
END_TEST

START_TEST(native_arch_needs_a_device)
{
    int major = 0, minor = 0;
    int have_gpu = mj_driver_device_cc(0, &major, &minor) == MOEJIT_OK;
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse("backend=simt,arch=native", &s);
    moejit_spec *d = NULL;
    moejit_status st_default = moejit_spec_parse("backend=simt", &d);
    if (have_gpu) {
        mj_arch want;
        ck_assert_int_eq(mj_arch_from_cc(major, minor, &want), MOEJIT_OK);
        ck_assert_int_eq(st, MOEJIT_OK);
        ck_assert_int_eq(s->arch, want);
        ck_assert_int_eq(st_default, MOEJIT_OK);
        ck_assert(moejit_spec_equal(s, d));
    } else {
        ck_assert(st == MOEJIT_ERR_NO_DRIVER || st == MOEJIT_ERR_NO_DEVICE);
        ck_assert_ptr_null(s);
        ck_assert_ptr_nonnull(strstr(moejit_last_error(), "arch: native needs a CUDA device ("));
        ck_assert_ptr_nonnull(strstr(moejit_last_error(), "give one of sm_80, sm_86"));
        /* arch defaults to native. */
        ck_assert_int_eq(st_default, st);
        /* The spec's own mistakes are reported before the missing device. */
        parse_fails("backend=simt,hidden=7", "hidden: must be a multiple of 8");
    }
    moejit_spec_destroy(s);
    moejit_spec_destroy(d);
}
END_TEST

START_TEST(arch_table_maps_compute_capabilities)
{
    static const struct {
        int major, minor;
        const char *name;
    } cc[] = {{8, 0, "sm_80"},  {8, 6, "sm_86"},    {8, 9, "sm_89"},
              {9, 0, "sm_90a"}, {10, 0, "sm_100a"}, {12, 0, "sm_120a"}};
    for (size_t i = 0; i < sizeof cc / sizeof cc[0]; i++) {
        mj_arch a;
        ck_assert_int_eq(mj_arch_from_cc(cc[i].major, cc[i].minor, &a), MOEJIT_OK);
        ck_assert_str_eq(mj_arch_names[a], cc[i].name);
        ck_assert_str_eq(mj_arch_target(a), cc[i].name);
    }
    mj_arch a;
    expect_error(mj_arch_from_cc(7, 5, &a), MOEJIT_ERR_UNSUPPORTED, "cc 7.5", "compute capability 7.5");
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "9.0 (sm_90a)"));
}
END_TEST

START_TEST(equal_handles_null_and_identity)
{
    moejit_spec *a = parse_ok("arch=sm_80");
    ck_assert(moejit_spec_equal(a, a));
    ck_assert(!moejit_spec_equal(a, NULL));
    ck_assert(moejit_spec_equal(NULL, NULL));
    moejit_spec_destroy(a);
    moejit_spec_destroy(NULL);
}
END_TEST

static Suite *spec_suite(void)
{
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, act_overrides_is_printed_only_where_set);
    tcase_add_test(tc, defaults_fill_every_field);
    tcase_add_test(tc, fields_in_any_order_with_spaces_give_one_canonical);
    tcase_add_test(tc, canonical_text_parses_back_to_itself);
    tcase_add_test(tc, json_and_text_forms_canonicalise_alike);
    tcase_add_test(tc, to_json_round_trips_and_uses_numbers_for_integers);
    tcase_add_test(tc, unknown_duplicate_and_foreign_fields_are_errors);
    tcase_add_test(tc, validity_rules_name_the_field);
    tcase_add_test(tc, json_reader_rejects_wrong_types_and_keys);
    tcase_add_test(tc, values_are_read_exactly_or_refused);
    tcase_add_test(tc, auto_backend_is_the_fastest_that_supports_the_spec);
    tcase_add_test(tc, native_arch_needs_a_device);
    tcase_add_test(tc, arch_table_maps_compute_capabilities);
    tcase_add_test(tc, equal_handles_null_and_identity);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(spec_suite)
