/*
 * This file contains the tests of core/matrix.c: the simt row accepts what it declares and
 * rejects the rest with a message naming the field, the validation state (what is built but
 * not yet validated on hardware is refused unless allowed), and the three printers with their
 * marks of unvalidated values.
 */
#include <check.h>
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/check_main.h"
#include "core/matrix.h"
#include "moejit.h"
#include "core/spec.h"

static moejit_spec *parse_ok(const char *text)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse(text, &s);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

/* check_support of the spec text fails as unsupported with exactly this message. */
static void unsupported(const char *text, const char *message)
{
    moejit_spec *s = parse_ok(text);
    ck_assert_int_eq(moejit_check_support(s), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_str_eq(moejit_last_error(), message);
    moejit_spec_destroy(s);
}

START_TEST(simt_row_is_declared_as_static_data)
{
    const mj_backend_caps *c = mj_backend_caps_of(MJ_BACKEND_SIMT);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(mj_backend_table_len, MJ_BACKEND_COUNT);
    ck_assert_uint_eq(c->built.quants, MJ_BIT(MJ_QUANT_COUNT) - 1u); /* every format of the contract */
    ck_assert_uint_eq(c->built.routings, MJ_BIT(MJ_ROUTING_COUNT) - 1u);
    ck_assert_uint_eq(c->built.w1_layouts, MJ_BIT(MJ_W1_LAYOUT_COUNT) - 1u);
    ck_assert_uint_eq(c->built.biases, MJ_BIT(MJ_BIAS_COUNT) - 1u);
    ck_assert_uint_eq(c->built.archs, (1u << MJ_ARCH_COUNT) - 1u);
    const mj_backend_caps *mma = mj_backend_caps_of(MJ_BACKEND_MMA);
    const mj_backend_caps *wgmma = mj_backend_caps_of(MJ_BACKEND_WGMMA);
    ck_assert_ptr_nonnull(mma);
    ck_assert_ptr_nonnull(wgmma);
    /* The tensor-core backends take 16-bit and 4-bit weights, wgmma also fp8; wgmma needs
     * Hopper's sm_90a. */
    const unsigned tc16 = MJ_BIT(MJ_QUANT_BF16) | MJ_BIT(MJ_QUANT_FP16);
    const unsigned tc4 = MJ_BIT(MJ_QUANT_W4A16) | MJ_BIT(MJ_QUANT_MXFP4);
    const unsigned fp8 = MJ_BIT(MJ_QUANT_FP8_TENSOR) | MJ_BIT(MJ_QUANT_FP8_BLOCK);
    ck_assert_uint_eq(mma->built.quants, tc16 | tc4);
    ck_assert_uint_eq(wgmma->built.quants, tc16 | tc4 | fp8);
    /* every one of them has passed its device checks */
    ck_assert_uint_eq(mma->validated.quants, tc16 | tc4);
    ck_assert_uint_eq(wgmma->validated.quants, tc16 | tc4 | fp8);
    ck_assert_uint_eq(mma->built.archs, (1u << MJ_ARCH_COUNT) - 1u);
    ck_assert_uint_eq(wgmma->built.archs, MJ_BIT(MJ_ARCH_SM90A));
    for (size_t i = 0; i < mj_act_table_len; i++) ck_assert(c->built.acts & MJ_BIT(mj_act_table[i].kind));
    ck_assert(!(c->built.acts & MJ_BIT(5))); /* the internal SwiGLU-with-bias variant is no user value */
}
END_TEST

START_TEST(simt_accepts_every_activation_dtype_arch_and_routing)
{
    static const char *const dt[] = {"quant=bf16,dtype=bf16", "quant=fp16,dtype=fp16"};
    static const char *const routing[] = {"softmax_topk", "renormalize", "precomputed"};
    int n = 0;
    for (size_t a = 0; a < mj_act_table_len; a++)
        for (size_t d = 0; d < 2; d++)
            for (int arch = 0; arch < MJ_ARCH_COUNT; arch++)
                for (size_t r = 0; r < 3; r++) {
                    char text[256];
                    snprintf(text, sizeof text, "backend=simt,%s,act=%s,arch=%s,routing=%s", dt[d],
                             mj_act_table[a].name, mj_arch_names[arch], routing[r]);
                    moejit_spec *s = parse_ok(text);
                    ck_assert_msg(moejit_check_support(s) == MOEJIT_OK, "%s: %s", text,
                                  moejit_last_error());
                    moejit_spec_destroy(s);
                    n++;
                }
    ck_assert_int_eq(n, 10 * 2 * 6 * 3);
}
END_TEST

/* check_support of a spec whose field was set past what the parser allows. */
static void unsupported_mutated(const char *text, int dtype, int logits, const char *message)
{
    moejit_spec *s = parse_ok(text);
    if (dtype >= 0) s->dtype = (mj_dtype)dtype;
    if (logits >= 0) s->logits_dtype = (mj_dtype)logits;
    ck_assert_int_eq(moejit_check_support(s), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_str_eq(moejit_last_error(), message);
    moejit_spec_destroy(s);
}

START_TEST(simt_rejects_what_it_does_not_declare)
{
    /* simt declares every quant, routing, layout and bias the parser accepts; what it leaves
     * out (fp32 activations, fp16 logits) the parser already refuses, so the spec is edited. */
    unsupported_mutated("backend=simt,quant=fp8_block,arch=sm_90a", MJ_DTYPE_FP32, -1,
                        "backend simt does not support dtype fp32 on sm_90a; supported dtypes: bf16, fp16");
    unsupported_mutated("backend=simt,arch=sm_80,routing=deepseek_v3", -1, MJ_DTYPE_FP16,
                        "backend simt does not support logits fp16 on sm_80; supported logits dtypes: "
                        "bf16, fp32");
}
END_TEST

START_TEST(tensor_core_backends_refuse_what_they_do_not_declare)
{
    unsupported("backend=wgmma,arch=sm_80",
                "backend wgmma does not support arch sm_80; supported archs: sm_90a");
    unsupported("backend=mma,quant=fp8_block,arch=sm_90a",
                "backend mma does not support quant fp8_block on sm_90a; supported quants: bf16, fp16, w4a16, mxfp4");
    ck_assert_int_eq(moejit_check_support(NULL), MOEJIT_ERR_INVALID_ARGUMENT);
}
END_TEST

static char *format(const char *fmt)
{
    mj_buf b = MJ_BUF_INIT;
    moejit_status st = mj_matrix_format(fmt, &b);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", fmt, moejit_last_error());
    return mj_buf_take(&b);
}

START_TEST(markdown_has_the_header_and_every_simt_activation)
{
    char *md = format("markdown");
    ck_assert_ptr_nonnull(strstr(
        md,
        "| backend | quantizations | dtypes | activations | archs | routing | logits | W1 layouts | biases | "
        "act overrides |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"));
    ck_assert_ptr_nonnull(
        strstr(md, "| simt | bf16, fp16, fp8_tensor, fp8_block, w4a16, mxfp4 | bf16, fp16 | "));
    for (size_t i = 0; i < mj_act_table_len; i++)
        ck_assert_msg(strstr(md, mj_act_table[i].name), "markdown lacks %s", mj_act_table[i].name);
    ck_assert_ptr_nonnull(
        strstr(md, "gelu, relu, silu, swiglu, geglu, relu2, swiglu_step, geglu_tanh, identity, situ"));
    ck_assert_ptr_nonnull(strstr(md, "sm_80, sm_86, sm_89, sm_90a, sm_100a, sm_120a"));
    /* Deterministic: a second rendering is byte-identical. */
    char *md2 = format("markdown");
    ck_assert_str_eq(md, md2);
    free(md);
    free(md2);
}
END_TEST

START_TEST(json_matrix_parses_and_lists_simt)
{
    char *js = format("json");
    cJSON *root = cJSON_Parse(js);
    ck_assert_ptr_nonnull(root);
    cJSON *backends = cJSON_GetObjectItem(root, "backends");
    ck_assert(cJSON_IsArray(backends));
    ck_assert_int_eq(cJSON_GetArraySize(backends), MJ_BACKEND_COUNT);
    cJSON *simt = cJSON_GetArrayItem(backends, 0);
    ck_assert_str_eq(cJSON_GetObjectItem(simt, "name")->valuestring, "simt");
    cJSON *acts = cJSON_GetObjectItem(simt, "acts");
    ck_assert_int_eq(cJSON_GetArraySize(acts), 10);
    ck_assert_str_eq(cJSON_GetArrayItem(acts, 9)->valuestring, "situ");
    cJSON *quants = cJSON_GetObjectItem(simt, "quants");
    ck_assert_int_eq(cJSON_GetArraySize(quants), 6);
    ck_assert_str_eq(cJSON_GetArrayItem(quants, 1)->valuestring, "fp16");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(simt, "archs")), 6);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(simt, "biases")), 4);
    cJSON_Delete(root);
    free(js);
}
END_TEST

START_TEST(text_table_is_aligned_and_unknown_formats_fail)
{
    char *txt = format("text");
    /* Header line, dashes, the simt row: the columns start at the same offsets. */
    const char *l0 = txt, *l1 = strchr(l0, '\n') + 1, *l2 = strchr(l1, '\n') + 1;
    ck_assert(strncmp(l0, "backend", 7) == 0);
    ck_assert(strncmp(l2, "simt", 4) == 0);
    const char *q0 = strstr(l0, "quantizations"), *q2 = strstr(l2, "bf16");
    ck_assert_int_eq((int)(q0 - l0), (int)(q2 - l2));
    ck_assert_ptr_nonnull(strstr(txt, "simt: portable CUDA cores, sm_80+"));
    free(txt);

    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_matrix_format("xml", &b), MOEJIT_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(moejit_last_error(), "format: unknown value 'xml'; allowed: text, markdown, json");
    mj_buf_free(&b);
}
END_TEST

START_TEST(validated_values_are_a_subset_of_the_built_ones)
{
    for (size_t r = 0; r < mj_backend_table_len; r++) {
        const mj_cap_masks *b = &mj_backend_table[r].built, *v = &mj_backend_table[r].validated;
        const uint32_t built[] = {b->quants, b->dtypes, b->acts, b->archs, b->routings, b->w1_layouts, b->biases,
                                  b->logits_dtypes, b->act_overrides};
        const uint32_t valid[] = {v->quants, v->dtypes, v->acts, v->archs, v->routings, v->w1_layouts, v->biases,
                                  v->logits_dtypes, v->act_overrides};
        for (size_t i = 0; i < sizeof built / sizeof built[0]; i++) {
            ck_assert_msg((valid[i] & ~built[i]) == 0, "row %zu field %zu: validated outside built", r, i);
            ck_assert_msg(valid[i] != 0, "row %zu field %zu: nothing validated", r, i);
        }
    }
    /* simt: everything it builds is validated */
    const mj_backend_caps *simt = mj_backend_caps_of(MJ_BACKEND_SIMT);
    ck_assert_mem_eq(&simt->built, &simt->validated, sizeof simt->built);
    /* mma and wgmma build every routing method from fp32 or bf16 logits, and the H200 has run
     * them all against the float64 reference */
    for (int be = MJ_BACKEND_MMA; be <= MJ_BACKEND_WGMMA; be++) {
        const mj_backend_caps *c = mj_backend_caps_of((mj_backend)be);
        ck_assert_uint_eq(c->built.routings, MJ_BIT(MJ_ROUTING_COUNT) - 1u);
        ck_assert_uint_eq(c->validated.routings, c->built.routings);
        ck_assert_uint_eq(c->built.logits_dtypes, MJ_BIT(MJ_DTYPE_FP32) | MJ_BIT(MJ_DTYPE_BF16));
        ck_assert_uint_eq(c->validated.logits_dtypes, c->built.logits_dtypes);
        /* every format each backend builds has run against the float64 reference */
        ck_assert_uint_eq(c->validated.quants, c->built.quants);
        ck_assert_uint_eq(c->validated.acts, c->built.acts);
        ck_assert_uint_eq(c->validated.archs, c->built.archs);
        /* every W1 layout, bias and the per-expert overrides, each run on the H200 */
        ck_assert_uint_eq(c->built.w1_layouts, MJ_BIT(MJ_W1_LAYOUT_COUNT) - 1u);
        ck_assert_uint_eq(c->built.biases, MJ_BIT(MJ_BIAS_COUNT) - 1u);
        ck_assert_uint_eq(c->built.act_overrides, MJ_BIT(MJ_OVERRIDES_COUNT) - 1u);
        ck_assert_uint_eq(c->validated.w1_layouts, c->built.w1_layouts);
        ck_assert_uint_eq(c->validated.biases, c->built.biases);
        ck_assert_uint_eq(c->validated.act_overrides, c->built.act_overrides);
    }
}
END_TEST

/* The table as it stood between the tensor-core routing methods' build and their GPU run:
 * mma and wgmma validated only softmax_topk, renormalize and precomputed from fp32 logits. The
 * check and the printers are tested on it, since a value built but not yet validated exists in
 * the backends' own table only for that while. */
static mj_backend_caps pending_rows[8];
static mj_caps_table pending(void)
{
    ck_assert_uint_le(mj_backend_table_len, 8);
    memcpy(pending_rows, mj_backend_table, mj_backend_table_len * sizeof *pending_rows);
    for (size_t r = 0; r < mj_backend_table_len; r++) {
        if (pending_rows[r].backend == MJ_BACKEND_SIMT) continue;
        pending_rows[r].validated.routings =
            MJ_BIT(MJ_ROUTING_SOFTMAX_TOPK) | MJ_BIT(MJ_ROUTING_RENORMALIZE) | MJ_BIT(MJ_ROUTING_PRECOMPUTED);
        pending_rows[r].validated.logits_dtypes = MJ_BIT(MJ_DTYPE_FP32);
        pending_rows[r].validated.quants &= ~(MJ_BIT(MJ_QUANT_W4A16) | MJ_BIT(MJ_QUANT_FP8_BLOCK));
    }
    return (mj_caps_table){pending_rows, mj_backend_table_len};
}

/* check_validated of the spec text on the pending table: refused by default with exactly this
 * message, allowed with the flag; check_support passes it either way; the backends' own
 * table, whose values the GPU has run, passes it. */
static void unvalidated(const char *text, const char *message)
{
    mj_caps_table t = pending();
    moejit_spec *s = parse_ok(text);
    ck_assert_msg(moejit_check_support(s) == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    ck_assert_int_eq(mj_check_validated_in(&t, s, 0), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_str_eq(moejit_last_error(), message);
    ck_assert_int_eq(mj_check_validated_in(&t, s, 1), MOEJIT_OK);
    ck_assert_int_eq(mj_check_validated(s, 0), MOEJIT_OK);
    moejit_spec_destroy(s);
}

static void validated(const char *text)
{
    mj_caps_table t = pending();
    moejit_spec *s = parse_ok(text);
    ck_assert_msg(moejit_check_support(s) == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    ck_assert_msg(mj_check_validated_in(&t, s, 0) == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    moejit_spec_destroy(s);
}

START_TEST(unvalidated_values_are_refused_unless_allowed)
{
    static const char *const routings[] = {"sigmoid_topk", "sigmoid_renorm",
                                            "deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5", "llama4"};
    static const char *const names[] = {"sigmoid_topk", "sigmoid_renorm", "deepseek_v3", "llama4"};
    for (int be = 0; be < 2; be++)
        for (size_t r = 0; r < 4; r++) {
            const char *backend = be ? "wgmma" : "mma";
            char text[256], message[512];
            snprintf(text, sizeof text, "backend=%s,quant=bf16,act=swiglu,arch=sm_90a,routing=%s", backend,
                     routings[r]);
            snprintf(message, sizeof message,
                     "backend %s: routing %s is built, not yet validated on hardware; set "
                     "MOEJIT_ALLOW_UNVALIDATED=1 (or moejit_options.allow_unvalidated) to use it",
                     backend, names[r]);
            unvalidated(text, message);
        }
    /* bf16 logits, with a validated routing method */
    unvalidated("backend=mma,quant=fp16,act=relu2,arch=sm_80,routing=renormalize,logits=bf16",
                "backend mma: logits bf16 is built, not yet validated on hardware; set "
                "MOEJIT_ALLOW_UNVALIDATED=1 (or moejit_options.allow_unvalidated) to use it");
    /* what was validated stays allowed; simt is validated throughout */
    validated("backend=mma,quant=bf16,act=swiglu,arch=sm_80,routing=renormalize");
    validated("backend=wgmma,quant=fp16,act=relu2,arch=sm_90a,routing=softmax_topk");
    validated("backend=wgmma,quant=bf16,act=situ,arch=sm_90a,routing=precomputed");
    validated("backend=simt,quant=fp8_block,act=swiglu,arch=sm_90a,routing=deepseek_v3,logits=bf16,bias=both");
    validated("backend=simt,quant=bf16,act=swiglu,arch=sm_80,routing=llama4");
    /* what is not built is check_support's to refuse: this check passes it */
    mj_caps_table t = pending();
    moejit_spec *s = parse_ok("backend=mma,quant=fp8_block,act=swiglu,arch=sm_90a");
    ck_assert_int_eq(mj_check_validated_in(&t, s, 0), MOEJIT_OK);
    moejit_spec_destroy(s);
    ck_assert_int_eq(mj_check_validated(NULL, 0), MOEJIT_ERR_INVALID_ARGUMENT);
}
END_TEST

/* The printers on the pending table: what is not validated carries a mark and the legend. */
static char *format_pending(const char *fmt)
{
    mj_caps_table t = pending();
    mj_buf b = MJ_BUF_INIT;
    ck_assert_int_eq(mj_matrix_format_in(&t, fmt, &b), MOEJIT_OK);
    return mj_buf_take(&b);
}

START_TEST(printers_mark_unvalidated_values)
{
    /* the backends' own table, every value of which has run on the GPU: no mark, no legend */
    char *own = format("markdown");
    ck_assert_ptr_nonnull(strstr(own, "| up_gate, gate_up, interleaved | none, b1, b2, both | none, per_expert |\n"));
    ck_assert_ptr_nonnull(strstr(own, "| mma | bf16, fp16, w4a16, mxfp4 | "));
    ck_assert_ptr_nonnull(strstr(own, "| wgmma | bf16, fp16, fp8_tensor, fp8_block, w4a16, mxfp4 | "));
    ck_assert_ptr_null(strchr(own, '*'));
    ck_assert_ptr_null(strstr(own, "not yet validated"));
    free(own);
    /* the pending table (w4a16 and fp8_block, some routings and bf16 logits not yet run): those
     * cells are marked, simt's none */
    char *md = format_pending("markdown");
    ck_assert_ptr_nonnull(strstr(md, "| mma | bf16, fp16, w4a16\\*, mxfp4 | bf16, fp16 | "));
    ck_assert_ptr_nonnull(strstr(md, "| wgmma | bf16, fp16, fp8_tensor, fp8_block\\*, w4a16\\*, mxfp4 | "));
    ck_assert_ptr_nonnull(strstr(md, " | softmax_topk, renormalize, sigmoid_topk\\*, sigmoid_renorm\\*, "
                                     "deepseek_v3\\*, llama4\\*, precomputed | bf16\\*, fp32 | up_gate, "
                                     "gate_up, interleaved | none, b1, b2, both | none, per_expert |\n"));
    /* simt's cells carry no mark */
    ck_assert_ptr_nonnull(strstr(md, " | softmax_topk, renormalize, sigmoid_topk, sigmoid_renorm, deepseek_v3, "
                                     "llama4, precomputed | bf16, fp32 | up_gate, gate_up, interleaved | "));
    ck_assert_ptr_nonnull(strstr(md, "\n\n\\* built, not yet validated on hardware\n"));
    free(md);

    char *txt = format_pending("text");
    ck_assert_ptr_nonnull(strstr(txt, "softmax_topk, renormalize, sigmoid_topk*, sigmoid_renorm*, deepseek_v3*, "
                                      "llama4*, precomputed  bf16*, fp32 "));
    ck_assert_ptr_nonnull(strstr(txt, "\n* built, not yet validated on hardware\n"));
    free(txt);

    char *js = format_pending("json");
    cJSON *root = cJSON_Parse(js);
    ck_assert_ptr_nonnull(root);
    cJSON *backends = cJSON_GetObjectItem(root, "backends");
    for (int i = 0; i < cJSON_GetArraySize(backends); i++) {
        cJSON *b = cJSON_GetArrayItem(backends, i);
        const char *name = cJSON_GetObjectItem(b, "name")->valuestring;
        cJSON *un = cJSON_GetObjectItem(b, "unvalidated");
        ck_assert(cJSON_IsObject(un));
        cJSON *r = cJSON_GetObjectItem(un, "routings"), *l = cJSON_GetObjectItem(un, "logits_dtypes");
        ck_assert(cJSON_IsArray(r) && cJSON_IsArray(l));
        /* built lists keep every built value, unmarked */
        ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b, "routings")), MJ_ROUTING_COUNT);
        if (!strcmp(name, "simt")) {
            ck_assert_int_eq(cJSON_GetArraySize(r), 0);
            ck_assert_int_eq(cJSON_GetArraySize(l), 0);
            continue;
        }
        ck_assert_int_eq(cJSON_GetArraySize(r), 4);
        ck_assert_str_eq(cJSON_GetArrayItem(r, 0)->valuestring, "sigmoid_topk");
        ck_assert_str_eq(cJSON_GetArrayItem(r, 3)->valuestring, "llama4");
        ck_assert_int_eq(cJSON_GetArraySize(l), 1);
        ck_assert_str_eq(cJSON_GetArrayItem(l, 0)->valuestring, "bf16");
        /* w4a16 (and wgmma's fp8_block), built only */
        cJSON *q = cJSON_GetObjectItem(un, "quants");
        const int want = !strcmp(name, "mma") ? 1 : 2;
        ck_assert_int_eq(cJSON_GetArraySize(q), want);
        ck_assert_str_eq(cJSON_GetArrayItem(q, want - 1)->valuestring, "w4a16");
        if (want == 2) ck_assert_str_eq(cJSON_GetArrayItem(q, 0)->valuestring, "fp8_block");
    }
    ck_assert_str_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "legend"), "unvalidated")->valuestring,
                     "built, not yet validated on hardware");
    cJSON_Delete(root);
    free(js);
}
END_TEST

/* What the per-field masks cannot say: wgmma's fp8 layers take up_gate without biases or
 * overrides, refused naming the field and the value. */
START_TEST(wgmma_fp8_refuses_layouts_biases_and_overrides)
{
    static const struct { const char *extra, *message; } c[] = {
        {",w1_layout=interleaved", "backend wgmma does not support w1_layout interleaved with quant fp8_block"},
        {",bias=b2", "backend wgmma does not support bias b2 with quant fp8_block"},
        {",act_overrides=per_expert", "backend wgmma does not support act_overrides per_expert with quant fp8_block"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char text[160];
        snprintf(text, sizeof text, "backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a%s", c[i].extra);
        moejit_spec *s = parse_ok(text);
        ck_assert_int_eq(moejit_check_support(s), MOEJIT_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(moejit_last_error(), c[i].message), "%s: %s", text, moejit_last_error());
        moejit_spec_destroy(s);
    }
    moejit_spec *ok = parse_ok("backend=wgmma,quant=bf16,act=swiglu,arch=sm_90a,w1_layout=interleaved,bias=b2");
    ck_assert_int_eq(moejit_check_support(ok), MOEJIT_OK);
    moejit_spec_destroy(ok);
}
END_TEST

/* act_overrides is a spec field like the others: simt builds and has validated both values;
 * a row that does not build per_expert refuses it naming the field. */
START_TEST(act_overrides_is_checked_against_the_row)
{
    moejit_spec *simt = parse_ok("backend=simt,quant=bf16,act=swiglu,arch=sm_90a,act_overrides=per_expert");
    moejit_spec *mma = parse_ok("backend=mma,quant=bf16,act=swiglu,arch=sm_90a,act_overrides=per_expert");
    ck_assert_int_eq(moejit_check_support(simt), MOEJIT_OK);
    ck_assert_int_eq(mj_check_validated(simt, 0), MOEJIT_OK);
    ck_assert_int_eq(moejit_check_support(mma), MOEJIT_OK);
    mj_caps_table t = pending();
    for (size_t r = 0; r < t.n; r++)
        if (pending_rows[r].backend == MJ_BACKEND_MMA)
            pending_rows[r].built.act_overrides = pending_rows[r].validated.act_overrides = MJ_BIT(MJ_OVERRIDES_NONE);
    ck_assert_int_eq(mj_check_validated_in(&t, mma, 0), MOEJIT_OK); /* not built: check_support's to refuse */
    moejit_spec_destroy(simt);
    moejit_spec_destroy(mma);
}
END_TEST

static Suite *matrix_suite(void)
{
    Suite *s = suite_create("matrix");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, simt_row_is_declared_as_static_data);
    tcase_add_test(tc, simt_accepts_every_activation_dtype_arch_and_routing);
    tcase_add_test(tc, simt_rejects_what_it_does_not_declare);
    tcase_add_test(tc, tensor_core_backends_refuse_what_they_do_not_declare);
    tcase_add_test(tc, markdown_has_the_header_and_every_simt_activation);
    tcase_add_test(tc, json_matrix_parses_and_lists_simt);
    tcase_add_test(tc, text_table_is_aligned_and_unknown_formats_fail);
    tcase_add_test(tc, validated_values_are_a_subset_of_the_built_ones);
    tcase_add_test(tc, unvalidated_values_are_refused_unless_allowed);
    tcase_add_test(tc, printers_mark_unvalidated_values);
    tcase_add_test(tc, act_overrides_is_checked_against_the_row);
    tcase_add_test(tc, wgmma_fp8_refuses_layouts_biases_and_overrides);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(matrix_suite)
