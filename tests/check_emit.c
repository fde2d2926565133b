/*
 * This file contains the tests of codegen/emit.c: the generated source is byte-deterministic
 * (same spec, and a spec re-read from its own canonical text), carries the canonical spec,
 * changes with every bit of an activation parameter (one ulp, -0.0 vs +0.0) and with every
 * field of the format and layout widening (quant, fp8_act, group, zero_point, w1_layout, bias, routing and its
 * deepseek_v3 parameters, logits), writes floats only as exact hex literals, lists the
 * layer's kernel table, and refuses what the simt templates cannot build, naming the field.
 */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "templates/common/params.h"
#include "codegen/emit.h"
#include "lib/check_main.h"
#include "moejit.h"
#include "core/spec.h"
#include "core/status.h"
#include "core/strbuf.h"

#define GPT_OSS "backend=simt,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a"

static moejit_spec *parse_ok(const char *text)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse(text, &s);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

static void emit_ok(const moejit_spec *s, mj_source *src)
{
    moejit_status st = mj_emit(s, src);
    ck_assert_msg(st == MOEJIT_OK, "emit '%s': %s", moejit_spec_canonical(s), moejit_last_error());
    ck_assert_ptr_nonnull(src->text);
    ck_assert_uint_eq(strlen(src->text), src->len);
}

/* Source of the spec given as text (caller frees). */
static char *source_of(const char *text)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    emit_ok(s, &src);
    char *copy = strdup(src.text);
    mj_source_free(&src);
    moejit_spec_destroy(s);
    return copy;
}

/* "act=swiglu(alpha=A,beta=B,limit=7)" with A and B written as exact hex. */
static char *swiglu_source(float alpha, float beta)
{
    mj_buf b = MJ_BUF_INIT;
    mj_buf_puts(&b, "backend=simt,quant=bf16,arch=sm_90a,act=swiglu(alpha=");
    mj_buf_hexfloat(&b, alpha);
    mj_buf_puts(&b, ",beta=");
    mj_buf_hexfloat(&b, beta);
    mj_buf_puts(&b, ",limit=7)");
    char *text = mj_buf_take(&b);
    ck_assert_ptr_nonnull(text);
    char *src = source_of(text);
    free(text);
    return src;
}

/* ---- a small C++ lexer: decimal float literals outside comments and strings ------------- */

static int ident_char(char c) { return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

/* Counts float literals in code (comments and string literals skipped): *decimal gets the
 * non-hex ones (1.5f, 2e3, .5), *hex the hex floats (0x1.8p+0f). */
static void count_float_literals(const char *s, int *decimal, int *hex, char *first_bad, size_t cap)
{
    *decimal = *hex = 0;
    if (cap) first_bad[0] = '\0';
    for (size_t i = 0; s[i];) {
        if (s[i] == '/' && s[i + 1] == '/') {
            while (s[i] && s[i] != '\n') i++;
        } else if (s[i] == '/' && s[i + 1] == '*') {
            const char *end = strstr(s + i + 2, "*/");
            i = end ? (size_t)(end - s) + 2 : strlen(s);
        } else if (s[i] == '"' || s[i] == '\'') {
            char q = s[i++];
            while (s[i] && s[i] != q) i += s[i] == '\\' && s[i + 1] ? 2 : 1;
            if (s[i]) i++;
        } else if ((s[i] >= '0' && s[i] <= '9') || (s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9')) {
            if (i > 0 && ident_char(s[i - 1])) { /* inside an identifier (kActParam0) */
                i++;
                continue;
            }
            size_t start = i;
            int is_hex = s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X');
            int dot = 0, exp = 0;
            while (ident_char(s[i]) || s[i] == '.' ||
                   ((s[i] == '+' || s[i] == '-') &&
                    (is_hex ? (s[i - 1] | 32) == 'p' : (s[i - 1] | 32) == 'e'))) {
                if (s[i] == '.') dot = 1;
                if (is_hex ? (s[i] | 32) == 'p' : (s[i] | 32) == 'e') exp = 1;
                i++;
            }
            if (is_hex && exp) (*hex)++;
            else if (!is_hex && (dot || exp)) {
                if (*decimal == 0 && cap) snprintf(first_bad, cap, "%.*s", (int)(i - start), s + start);
                (*decimal)++;
            }
        } else {
            i++;
        }
    }
}

START_TEST(lexer_finds_decimal_floats_and_skips_comments)
{
    int dec, hex;
    char bad[64];
    count_float_literals("float a = 1.5f; // 2.5\n/* 3.5 */ int k2 = 0x10; const char *s = \"4.5\";",
                         &dec, &hex, bad, sizeof bad);
    ck_assert_int_eq(dec, 1);
    ck_assert_str_eq(bad, "1.5f");
    count_float_literals("float b = 0x1.8p+0f + 1e-3f;", &dec, &hex, bad, sizeof bad);
    ck_assert_int_eq(dec, 1);
    ck_assert_int_eq(hex, 1);
    ck_assert_str_eq(bad, "1e-3f");
}
END_TEST

START_TEST(same_spec_gives_identical_bytes)
{
    moejit_spec *s = parse_ok(GPT_OSS);
    mj_source a, b;
    emit_ok(s, &a);
    emit_ok(s, &b);
    ck_assert_uint_eq(a.len, b.len);
    ck_assert_int_eq(memcmp(a.text, b.text, a.len), 0);
    mj_source_free(&a);
    mj_source_free(&b);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(spec_reparsed_from_canonical_gives_identical_bytes)
{
    moejit_spec *s = parse_ok(GPT_OSS);
    moejit_spec *again = parse_ok(moejit_spec_canonical(s));
    mj_source a, b;
    emit_ok(s, &a);
    emit_ok(again, &b);
    ck_assert_str_eq(a.text, b.text);
    mj_source_free(&a);
    mj_source_free(&b);
    moejit_spec_destroy(again);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(source_carries_canonical_spec_and_versions)
{
    moejit_spec *s = parse_ok(GPT_OSS);
    mj_source src;
    emit_ok(s, &src);
    char line[4096];
    snprintf(line, sizeof line, "// spec: %s\n", moejit_spec_canonical(s));
    ck_assert_msg(strstr(src.text, line), "no '%s' in:\n%s", line, src.text);
    snprintf(line, sizeof line, "generated by moejit %s, generator %d", MOEJIT_VERSION_STRING,
             MJ_GENERATOR_VERSION);
    ck_assert_msg(strstr(src.text, line), "no '%s' in:\n%s", line, src.text);
    ck_assert_ptr_nonnull(strstr(src.text, "#include \"simt_layer.cuh\""));
    ck_assert_str_eq(src.name, "moejit_layer.cu");
    mj_source_free(&src);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(one_ulp_in_alpha_changes_the_source)
{
    char *a = swiglu_source(1.702f, 1.0f);
    char *b = swiglu_source(nextafterf(1.702f, 2.0f), 1.0f);
    ck_assert_str_ne(a, b);
    free(a);
    free(b);
}
END_TEST

START_TEST(negative_zero_beta_differs_from_positive_zero)
{
    char *a = swiglu_source(1.0f, 0.0f);
    char *b = swiglu_source(1.0f, -0.0f);
    ck_assert_str_ne(a, b);
    ck_assert_ptr_nonnull(strstr(b, "kActParam1 = -0x0p+0f;"));
    ck_assert_ptr_nonnull(strstr(a, "kActParam1 = 0x0p+0f;"));
    free(a);
    free(b);
}
END_TEST

/* The literal after "name = " read back with strtof. */
static float literal_after(const char *src, const char *name)
{
    const char *p = strstr(src, name);
    ck_assert_msg(p != NULL, "no %s in source", name);
    p += strlen(name);
    ck_assert(strncmp(p, " = ", 3) == 0);
    return strtof(p + 3, NULL);
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

START_TEST(parameter_literals_round_trip_bit_exactly)
{
    char *src = source_of(GPT_OSS);
    ck_assert_uint_eq(bits_of(literal_after(src, "kActParam0")), bits_of(1.702f));
    ck_assert_uint_eq(bits_of(literal_after(src, "kActParam1")), bits_of(1.0f));
    ck_assert_uint_eq(bits_of(literal_after(src, "kActParam2")), bits_of(7.0f));
    ck_assert_ptr_nonnull(strstr(src, "kActPresent2 = true;"));
    ck_assert_ptr_nonnull(strstr(src, "kActKind = 3;"));
    ck_assert_ptr_nonnull(strstr(src, "kGated = true;"));
    free(src);

    /* SiTU with linear_scale = none: present flag false, clamp given */
    src = source_of("backend=simt,quant=fp16,arch=sm_80,act=situ(gate_scale=4,linear_scale=none,clamp_limit=3)");
    ck_assert_ptr_nonnull(strstr(src, "kActKind = 10;"));
    ck_assert_ptr_nonnull(strstr(src, "kActPresent1 = false;"));
    ck_assert_ptr_nonnull(strstr(src, "kActPresent2 = true;"));
    ck_assert_uint_eq(bits_of(literal_after(src, "kActParam2")), bits_of(3.0f));
    ck_assert_ptr_nonnull(strstr(src, "kDtype = Dtype::fp16;"));
    free(src);
}
END_TEST

START_TEST(every_float_literal_is_hex)
{
    const char *specs[] = {
        GPT_OSS,
        "backend=simt,quant=fp16,arch=sm_86,act=situ(gate_scale=4.5,linear_scale=25,clamp_limit=0.001)",
        "backend=simt,quant=bf16,arch=sm_80,act=swiglu_step(limit=6.5)",
        "backend=simt,quant=bf16,arch=sm_80,act=relu2",
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        char *src = source_of(specs[i]);
        int dec, hex;
        char bad[64];
        count_float_literals(src, &dec, &hex, bad, sizeof bad);
        ck_assert_msg(dec == 0, "%s: decimal float literal '%s' in:\n%s", specs[i], bad, src);
        ck_assert_msg(hex == 4, "%s: %d hex float literals, want one per parameter slot and kRoutedScaling",
                      specs[i], hex);
        free(src);
    }
}
END_TEST

START_TEST(kernel_names_are_listed_in_table_order)
{
    static const char *const want[] = {"mj_route",      "mj_expert_offsets", "mj_scatter",
                                       "mj_gemm1_act",  "mj_gemm2",          "mj_finalize",
                                       "mj_x_amax",     "mj_x_quant",        "mj_inter_amax",
                                       "mj_inter_quant"};
    moejit_spec *s = parse_ok(GPT_OSS);
    mj_source src;
    emit_ok(s, &src);
    ck_assert_int_eq(src.n_kernels, (int)(sizeof want / sizeof want[0]));
    ck_assert_int_eq(src.n_kernels, MJ_SIMT_NUM_KERNELS);
    ck_assert_str_eq(src.kernel_names[MJ_SIMT_K_GEMM1_ACT], "mj_gemm1_act");
    /* each is defined as an extern "C" entry in the embedded layer header */
    const char *layer = NULL;
    for (size_t h = 0; h < mj_embedded_headers_len; h++)
        if (strcmp(mj_embedded_headers[h].name, "simt_layer.cuh") == 0) layer = mj_embedded_headers[h].data;
    ck_assert_ptr_nonnull(layer);
    for (int i = 0; i < src.n_kernels; i++) {
        ck_assert_str_eq(src.kernel_names[i], want[i]);
        char def[96];
        snprintf(def, sizeof def, "\n%s(const __grid_constant__ mj_layer_params p)", want[i]);
        ck_assert_msg(strstr(layer, def), "simt_layer.cuh does not define %s", want[i]);
    }
    mj_source_free(&src);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(pinned_shape_routing_and_tile_become_constants)
{
    char *src = source_of("backend=simt,quant=bf16,arch=sm_90a,act=silu,routing=precomputed,"
                          "hidden=2048,inter=768,experts=128,topk=8,tile=m16n64k32");
    ck_assert_ptr_nonnull(strstr(src, "kPinnedHidden = 2048;"));
    ck_assert_ptr_nonnull(strstr(src, "kPinnedInter = 768;"));
    ck_assert_ptr_nonnull(strstr(src, "kPinnedExperts = 128;"));
    ck_assert_ptr_nonnull(strstr(src, "kPinnedTopk = 8;"));
    ck_assert_ptr_nonnull(strstr(src, "kRouting = Routing::precomputed;"));
    ck_assert_ptr_nonnull(strstr(src, "BLOCK_M = 16;"));
    ck_assert_ptr_nonnull(strstr(src, "kGated = false;"));
    free(src);
    src = source_of("backend=simt,quant=bf16,arch=sm_90a,act=gelu");
    ck_assert_ptr_nonnull(strstr(src, "kPinnedHidden = 0;"));
    ck_assert_ptr_nonnull(strstr(src, "BLOCK_M = 32;"));
    free(src);
}
END_TEST

static void emit_fails(const char *text, moejit_status want, const char *part)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    moejit_status st = mj_emit(s, &src);
    ck_assert_msg(st == want, "%s: got %s (%s)", text, moejit_status_name(st), moejit_last_error());
    ck_assert_msg(strstr(moejit_last_error(), part), "%s: message '%s' lacks '%s'", text,
                  moejit_last_error(), part);
    ck_assert_ptr_null(src.text);
    moejit_spec_destroy(s);
}

START_TEST(unbuildable_specs_are_refused_naming_the_field)
{
    emit_fails("backend=mma,quant=fp8_block,act=silu,arch=sm_90a", MOEJIT_ERR_UNSUPPORTED, "quant");
    emit_fails("backend=simt,quant=bf16,act=silu,arch=sm_90a,tile=m8n8k8", MOEJIT_ERR_UNSUPPORTED,
               "tile");
    /* pinned shapes that cut a scale group */
    emit_fails("backend=simt,quant=fp8_block,act=silu,arch=sm_90a,hidden=2880", MOEJIT_ERR_INVALID_ARGUMENT,
               "hidden: quant=fp8_block needs a multiple of 128");
    emit_fails("backend=simt,quant=w4a16,group=64,zero_point=1,act=silu,arch=sm_90a,inter=64",
               MOEJIT_ERR_INVALID_ARGUMENT, "inter: quant=w4a16 with zero points needs a multiple of 128");
    emit_fails("backend=simt,quant=mxfp4,act=silu,arch=sm_90a,inter=48", MOEJIT_ERR_INVALID_ARGUMENT,
               "inter: quant=mxfp4 needs a multiple of 32");
    /* routing rules on pinned shapes */
    emit_fails("backend=simt,quant=bf16,act=silu,arch=sm_90a,routing=llama4,experts=16,topk=2",
               MOEJIT_ERR_INVALID_ARGUMENT, "topk: routing=llama4 is top-1");
    emit_fails("backend=simt,quant=bf16,act=silu,arch=sm_90a,routing=deepseek_v3,n_group=8,topk_group=1,"
               "experts=16,topk=4",
               MOEJIT_ERR_INVALID_ARGUMENT, "topk: deepseek_v3 chooses among topk_group x experts/n_group = 2");
}
END_TEST

START_TEST(edited_spec_values_the_templates_lack_are_refused)
{
    moejit_spec *s = parse_ok("backend=simt,quant=bf16,act=silu,arch=sm_90a");
    mj_source src;
    s->dtype = MJ_DTYPE_FP16; /* quant=bf16 with fp16 activations: no such layer */
    ck_assert_int_eq(mj_emit(s, &src), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "dtype: quant bf16 needs dtype bf16"));
    s->dtype = MJ_DTYPE_BF16;
    s->fp8_act = MJ_FP8_ACT_STATIC; /* fp8_act belongs to fp8_tensor */
    ck_assert_int_eq(mj_emit(s, &src), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "fp8_act"));
    s->fp8_act = MJ_FP8_ACT_TENSOR;
    s->logits_dtype = MJ_DTYPE_FP16;
    ck_assert_int_eq(mj_emit(s, &src), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "logits"));
    ck_assert_ptr_null(src.text);
    moejit_spec_destroy(s);
}
END_TEST

/* Every format, layout, bias and routing field reaches the source as a constant the templates read. */
START_TEST(format_layout_bias_and_routing_fields_become_constants)
{
    char *src = source_of("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=static,act=swiglu,"
                          "w1_layout=interleaved,bias=b1,logits=bf16");
    ck_assert_ptr_nonnull(strstr(src, "kQuant = Quant::fp8_tensor;"));
    ck_assert_ptr_nonnull(strstr(src, "kFp8Act = Fp8Act::static_scale;"));
    ck_assert_ptr_nonnull(strstr(src, "kW1Layout = W1Layout::interleaved;"));
    ck_assert_ptr_nonnull(strstr(src, "kHasB1 = true;"));
    ck_assert_ptr_nonnull(strstr(src, "kHasB2 = false;"));
    ck_assert_ptr_nonnull(strstr(src, "kLogitsDtype = Dtype::bf16;"));
    ck_assert_ptr_nonnull(strstr(src, "kActNParams = 3;"));
    ck_assert_ptr_nonnull(strstr(src, "kInt4Group = 0;"));
    free(src);

    src = source_of("backend=simt,arch=sm_90a,quant=w4a16,group=64,zero_point=1,act=relu2,bias=b2,"
                    "w1_layout=gate_up");
    ck_assert_ptr_nonnull(strstr(src, "kQuant = Quant::w4a16;"));
    ck_assert_ptr_nonnull(strstr(src, "kInt4Group = 64;"));
    ck_assert_ptr_nonnull(strstr(src, "kInt4Zero = true;"));
    ck_assert_ptr_nonnull(strstr(src, "kHasB1 = false;"));
    ck_assert_ptr_nonnull(strstr(src, "kHasB2 = true;"));
    ck_assert_ptr_nonnull(strstr(src, "kW1Layout = W1Layout::gate_up;"));
    ck_assert_ptr_nonnull(strstr(src, "kActNParams = 0;"));
    ck_assert_ptr_nonnull(strstr(src, "kFp8Act = Fp8Act::tensor;"));
    free(src);

    src = source_of("backend=simt,arch=sm_90a,quant=fp8_block,routing=deepseek_v3,n_group=8,topk_group=4,"
                    "routed_scaling=2.5,bias=both");
    ck_assert_ptr_nonnull(strstr(src, "kQuant = Quant::fp8_block;"));
    ck_assert_ptr_nonnull(strstr(src, "kRouting = Routing::deepseek_v3;"));
    ck_assert_ptr_nonnull(strstr(src, "kNGroup = 8;"));
    ck_assert_ptr_nonnull(strstr(src, "kTopkGroup = 4;"));
    ck_assert_ptr_nonnull(strstr(src, "kRoutedScaling = 0x1.4p+1f;"));
    ck_assert_ptr_nonnull(strstr(src, "kHasB1 = true;"));
    ck_assert_ptr_nonnull(strstr(src, "kHasB2 = true;"));
    free(src);

    /* routings other than deepseek_v3 get the neutral grouping */
    src = source_of("backend=simt,arch=sm_90a,quant=mxfp4,routing=sigmoid_renorm");
    ck_assert_ptr_nonnull(strstr(src, "kQuant = Quant::mxfp4;"));
    ck_assert_ptr_nonnull(strstr(src, "kRouting = Routing::sigmoid_renorm;"));
    ck_assert_ptr_nonnull(strstr(src, "kNGroup = 1;"));
    ck_assert_ptr_nonnull(strstr(src, "kRoutedScaling = 0x1p+0f;"));
    free(src);
}
END_TEST

/* fp8_act (added to the spec for fp8_tensor) is part of the canonical text, hence of the
 * source comment and the cache key; no other quant accepts it. */
START_TEST(fp8_act_is_canonical_for_fp8_tensor_only)
{
    moejit_spec *s = parse_ok("backend=simt,arch=sm_90a,quant=fp8_tensor");
    ck_assert_ptr_nonnull(strstr(moejit_spec_canonical(s), ",act=swiglu(alpha=0x1p+0,beta=0x0p+0,"
                                                            "limit=0x1.fffffep+127),fp8_act=tensor,arch="));
    moejit_spec *again = parse_ok(moejit_spec_canonical(s));
    ck_assert(moejit_spec_equal(s, again));
    moejit_spec_destroy(again);
    moejit_spec_destroy(s);
    s = parse_ok("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=static");
    ck_assert_int_eq(s->fp8_act, MJ_FP8_ACT_STATIC);
    char json[2048];
    ck_assert_int_eq(moejit_spec_to_json(s, json, sizeof json, NULL), MOEJIT_OK);
    ck_assert_ptr_nonnull(strstr(json, "\"fp8_act\":\"static\""));
    moejit_spec *from_json = NULL;
    ck_assert_int_eq(moejit_spec_from_json(json, &from_json), MOEJIT_OK);
    ck_assert(moejit_spec_equal(s, from_json));
    moejit_spec_destroy(from_json);
    moejit_spec_destroy(s);
    s = parse_ok("backend=simt,arch=sm_90a,quant=fp8_block");
    ck_assert_ptr_null(strstr(moejit_spec_canonical(s), "fp8_act"));
    moejit_spec_destroy(s);

    s = (moejit_spec *)0x1;
    ck_assert_int_eq(moejit_spec_parse("arch=sm_90a,quant=fp8_block,fp8_act=token", &s), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "fp8_act: only valid with quant=fp8_tensor (quant is fp8_block)");
    ck_assert_ptr_null(s);
    ck_assert_int_eq(moejit_spec_parse("arch=sm_90a,quant=fp8_tensor,fp8_act=block", &s), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "fp8_act: unknown value 'block'; allowed: tensor, token, static");
}
END_TEST

/* Specs that differ in exactly one of those fields never share a source (hence a kernel). */
START_TEST(each_new_field_changes_the_source)
{
    static const char *const base = "backend=simt,arch=sm_90a,act=swiglu";
    static const char *const variants[] = {
        "quant=bf16",
        "quant=fp8_tensor",
        "quant=fp8_tensor,fp8_act=token",
        "quant=fp8_tensor,fp8_act=static",
        "quant=fp8_block",
        "quant=w4a16",
        "quant=w4a16,group=32",
        "quant=w4a16,zero_point=1",
        "quant=mxfp4",
        "quant=bf16,w1_layout=gate_up",
        "quant=bf16,w1_layout=interleaved",
        "quant=bf16,bias=b1",
        "quant=bf16,bias=b2",
        "quant=bf16,bias=both",
        "quant=bf16,routing=sigmoid_topk",
        "quant=bf16,routing=sigmoid_renorm",
        "quant=bf16,routing=llama4",
        "quant=bf16,routing=deepseek_v3",
        "quant=bf16,routing=deepseek_v3,n_group=2",
        "quant=bf16,routing=deepseek_v3,n_group=2,topk_group=2",
        "quant=bf16,routing=deepseek_v3,routed_scaling=2.5",
        "quant=bf16,logits=bf16",
    };
    enum { N = sizeof variants / sizeof variants[0] };
    char *src[N];
    for (int i = 0; i < N; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s,%s", base, variants[i]);
        src[i] = source_of(text);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            ck_assert_msg(strcmp(src[i], src[j]) != 0, "'%s' and '%s' give the same source", variants[i],
                          variants[j]);
    for (int i = 0; i < N; i++) free(src[i]);
}
END_TEST

static Suite *emit_suite(void)
{
    Suite *s = suite_create("emit");
    TCase *tc = tcase_create("emit");
    tcase_add_test(tc, lexer_finds_decimal_floats_and_skips_comments);
    tcase_add_test(tc, same_spec_gives_identical_bytes);
    tcase_add_test(tc, spec_reparsed_from_canonical_gives_identical_bytes);
    tcase_add_test(tc, source_carries_canonical_spec_and_versions);
    tcase_add_test(tc, one_ulp_in_alpha_changes_the_source);
    tcase_add_test(tc, negative_zero_beta_differs_from_positive_zero);
    tcase_add_test(tc, parameter_literals_round_trip_bit_exactly);
    tcase_add_test(tc, every_float_literal_is_hex);
    tcase_add_test(tc, kernel_names_are_listed_in_table_order);
    tcase_add_test(tc, pinned_shape_routing_and_tile_become_constants);
    tcase_add_test(tc, unbuildable_specs_are_refused_naming_the_field);
    tcase_add_test(tc, edited_spec_values_the_templates_lack_are_refused);
    tcase_add_test(tc, format_layout_bias_and_routing_fields_become_constants);
    tcase_add_test(tc, each_new_field_changes_the_source);
    tcase_add_test(tc, fp8_act_is_canonical_for_fp8_tensor_only);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(emit_suite)
