/*
 * This file contains the CPU tests of the `mma` backend's generator and templates: the source
 * is deterministic and carries the canonical spec and the mma kernel table; what the mma
 * templates cannot build is refused naming the field; layers compile with NVRTC at sm_80,
 * sm_90a and sm_120a into cubins that hold every kernel of the table, with no spills and no
 * stack frame, and the large-path GEMMs within the 128 registers their (256, 2) launch bounds
 * promise; when cuobjdump (and nvdisasm) can be found, the GEMM kernels' SASS is checked for
 * tensor-core MMAs (HMMA.16816), 16-byte cp.async (LDGSTS.E.BYPASS.128) and ldmatrix (LDSM).
 * Also the launch-time path choice and the workspace size.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "templates/common/mma_params.h"
#include "codegen/emit_backends.h"
#include "lib/emit_test_util.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_backends.h"
#include "lib/check_main.h"
#include "codegen/nvrtc_compile.h"
#include "core/spec.h"
#include "core/status.h"

/* The GEMM path the launch plan (runtime/gemm_plan.h) gives a forward of spec on args. */
static int plan_path(const moejit_spec *spec, const moejit_moe_args *args)
{
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, args, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &plan);
    return plan.path;
}

#define BASE "backend=mma,quant=bf16,act=swiglu,routing=renormalize"

static moejit_spec *parse_ok(const char *text)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse(text, &s);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

static char *source_of(const char *text)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    moejit_status st = mj_emit_mma(s, &src);
    ck_assert_msg(st == MOEJIT_OK, "emit '%s': %s", text, moejit_last_error());
    char *copy = strdup(src.text);
    ck_assert_int_eq(src.n_kernels, MJ_MMA_NUM_KERNELS);
    mj_source_free(&src);
    moejit_spec_destroy(s);
    return copy;
}

START_TEST(source_is_deterministic_and_names_spec_and_kernels)
{
    char *a = source_of(BASE ",arch=sm_90a");
    char *b = source_of(BASE ",arch=sm_90a");
    ck_assert_str_eq(a, b);
    moejit_spec *s = parse_ok(BASE ",arch=sm_90a");
    ck_assert_ptr_nonnull(strstr(a, moejit_spec_canonical(s)));
    moejit_spec_destroy(s);
    static const char *const names[MJ_MMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST};
    for (int i = 0; i < MJ_MMA_NUM_KERNELS; i++) ck_assert_ptr_nonnull(strstr(a, names[i]));
    ck_assert_ptr_nonnull(strstr(a, "#include \"mma_layer.cuh\""));
    ck_assert_ptr_null(strstr(a, "simt_layer.cuh"));
    /* a different activation or tile changes the bytes */
    char *c = source_of("backend=mma,quant=bf16,act=relu2,arch=sm_90a");
    char *d = source_of(BASE ",arch=sm_90a,tile=small");
    ck_assert_str_ne(a, c);
    ck_assert_str_ne(a, d);
    free(a), free(b), free(c), free(d);
}
END_TEST

START_TEST(every_routing_method_emits_its_constants)
{
    mj_test_routing_constants("backend=mma,quant=bf16,act=swiglu,arch=sm_90a", source_of);
}
END_TEST

static void refused(const char *text, const char *field)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    moejit_status st = mj_emit_mma(s, &src);
    ck_assert_msg(st != MOEJIT_OK, "'%s' must be refused", text);
    ck_assert_msg(strstr(moejit_last_error(), field) != NULL, "'%s': message '%s' must name %s", text,
                  moejit_last_error(), field);
    moejit_spec_destroy(s);
}

START_TEST(refuses_what_the_mma_templates_cannot_build_naming_the_field)
{
    refused("backend=mma,quant=fp8_block,act=swiglu,arch=sm_90a", "quant");
    /* every routing method builds; what each forbids is refused as for simt */
    refused("backend=mma,quant=bf16,act=swiglu,routing=llama4,experts=16,topk=2,arch=sm_90a", "topk: routing=llama4 is top-1");
    refused("backend=mma,quant=bf16,act=swiglu,routing=deepseek_v3,n_group=8,topk_group=1,experts=16,topk=4,"
            "arch=sm_90a", "topk: deepseek_v3 chooses among topk_group x experts/n_group = 2");
    refused("backend=mma,quant=bf16,act=swiglu,tile=m32n64k32,arch=sm_90a", "tile");
    refused("backend=mma,quant=bf16,act=swiglu,tile=tall,arch=sm_90a", "tile"); /* wgmma's only */
    refused("backend=mma,quant=bf16,act=swiglu,tile=pair,arch=sm_90a", "tile"); /* wgmma's only */
    refused("backend=simt,quant=bf16,act=swiglu,arch=sm_90a", "backend");
}
END_TEST

START_TEST(path_heuristic_follows_rows_per_expert_and_the_tile_field)
{
    ck_assert_int_eq(mj_mma_path_of("auto"), MJ_MMA_PATH_AUTO);
    ck_assert_int_eq(mj_mma_path_of("large"), MJ_MMA_PATH_LARGE);
    ck_assert_int_eq(mj_mma_path_of("small"), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(mj_mma_path_of("tall"), MJ_MMA_PATH_TALL);
    ck_assert_int_eq(mj_mma_path_of("pair"), MJ_MMA_PATH_PAIR);
    ck_assert_str_eq(mj_mma_path_name(MJ_MMA_PATH_PAIR), "pair");
    ck_assert_int_eq(mj_mma_path_of("m64"), -1);
    moejit_spec *s = parse_ok(BASE ",arch=sm_90a");
    moejit_moe_args a;
    memset(&a, 0, sizeof a);
    a.hidden = 2048, a.inter = 768, a.num_experts = 128, a.topk = 8;
    a.num_tokens = 1;
    ck_assert_int_eq(plan_path(s, &a), MJ_MMA_PATH_SMALL);
    a.num_tokens = 384; /* 3072 rows over 128 experts: 24 per expert, the last small batch */
    ck_assert_int_eq(plan_path(s, &a), MJ_MMA_PATH_SMALL);
    a.num_tokens = 385;
    ck_assert_int_eq(plan_path(s, &a), MJ_MMA_PATH_LARGE);
    moejit_spec_destroy(s);
    s = parse_ok(BASE ",arch=sm_90a,tile=small");
    a.num_tokens = 100000;
    ck_assert_int_eq(plan_path(s, &a), MJ_MMA_PATH_SMALL);
    moejit_spec_destroy(s);
    s = parse_ok(BASE ",arch=sm_90a,tile=large");
    a.num_tokens = 1;
    ck_assert_int_eq(plan_path(s, &a), MJ_MMA_PATH_LARGE);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(workspace_holds_the_intermediate_and_y_and_is_zero_for_no_tokens)
{
    moejit_spec *s = parse_ok(BASE ",arch=sm_90a");
    moejit_moe_args a;
    memset(&a, 0, sizeof a);
    a.hidden = 2048, a.inter = 768, a.num_experts = 128, a.topk = 8, a.num_tokens = 64;
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_mma_workspace_size(s, &a, &bytes), MOEJIT_OK);
    size_t pairs = 64 * 8;
    /* the bf16 intermediate and y in bf16 (the decode GEMM2 is not split here: no fp32 partials) */
    ck_assert_uint_ge(bytes, pairs * 768 * 2 + pairs * 2048 * 2);
    ck_assert_uint_lt(bytes, pairs * 768 * 2 + pairs * 2048 * 4);
    ck_assert_uint_eq(bytes % 256, 0);
    a.num_tokens = 0;
    ck_assert_int_eq(mj_launch_mma_workspace_size(s, &a, &bytes), MOEJIT_OK);
    ck_assert_uint_eq(bytes, 0);
    a.hidden = 2047;
    ck_assert_int_ne(mj_launch_mma_workspace_size(s, &a, &bytes), MOEJIT_OK);
    moejit_spec_destroy(s);
}
END_TEST

/* ---- compiles ---------------------------------------------------------------------------- */

/* cuobjdump on PATH (or $MOEJIT_CUOBJDUMP), else NULL: this machine's toolkit has none. */
static const char *find_cuobjdump(void)
{
    const char *env = getenv("MOEJIT_CUOBJDUMP");
    if (env && *env) return env;
    return system("command -v cuobjdump >/dev/null 2>&1") == 0 ? "cuobjdump" : NULL;
}

/* Counts lines of kernel `fn`'s SASS containing `what`; -1 when the dump failed. */
static int sass_count(const char *tool, const char *cubin_path, const char *fn, const char *what)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "%s --dump-sass --function %s %s 2>/dev/null | grep -c '%s'", tool, fn, cubin_path, what);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    int n = -1;
    if (fscanf(p, "%d", &n) != 1) n = -1;
    pclose(p);
    return n;
}

static void compile_and_check(const char *text, int check_sass)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    mj_program prog;
    memset(&prog, 0, sizeof prog);
    ck_assert_int_eq(mj_emit_mma(s, &src), MOEJIT_OK);
    mj_compile_request req = {&src, mj_arch_target(s->arch), mj_embedded_headers, mj_embedded_headers_len, 600};
    moejit_status st = mj_nvrtc_compile(&req, &prog);
    ck_assert_msg(st == MOEJIT_OK, "compile '%s': %s", text, moejit_last_error());
    /* the large GEMMs' (256, 2) launch bounds: 2 CTAs of 256 threads need <= 128 registers */
    const char *fail = mj_test_check_mma_program(text, &prog, 128);
    ck_assert_msg(fail == NULL, "%s", fail);
    const char *tool = check_sass ? find_cuobjdump() : NULL;
    if (tool) {
        char path[] = "/tmp/moejit-mma-XXXXXX";
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, prog.cubin, prog.cubin_len), (ssize_t)prog.cubin_len);
        close(fd);
        static const char *const gemms[] = {"mj_gemm1_act", "mj_gemm2", "mj_gemm1_act_small", "mj_gemm2_small"};
        for (size_t g = 0; g < 4; g++) {
            int hmma = sass_count(tool, path, gemms[g], "HMMA.16816.F32");
            int ldgsts = sass_count(tool, path, gemms[g], "LDGSTS.E.BYPASS.128");
            int ldsm = sass_count(tool, path, gemms[g], "LDSM");
            int local = sass_count(tool, path, gemms[g], "LDL\\|STL");
            ck_assert_msg(hmma > 0 && ldgsts > 0 && ldsm > 0 && local == 0,
                          "%s %s SASS: HMMA %d, LDGSTS.128 %d, LDSM %d, local memory %d", text, gemms[g], hmma,
                          ldgsts, ldsm, local);
        }
        unlink(path);
    } else if (check_sass) {
        fprintf(stderr, "check_mma_emit: no cuobjdump (set MOEJIT_CUOBJDUMP): SASS not inspected\n");
    }
    mj_program_free(&prog);
    mj_source_free(&src);
    moejit_spec_destroy(s);
}

START_TEST(layers_compile_at_sm80_sm90a_sm120a_without_spills)
{
    compile_and_check(BASE ",arch=sm_90a", 1);
    compile_and_check("backend=mma,quant=fp16,act=relu2,arch=sm_80", 1);
    if (mj_test_quick()) return;
    compile_and_check(BASE ",arch=sm_80,hidden=4096,inter=14336,experts=8,topk=2", 0);
    compile_and_check("backend=mma,quant=bf16,act=situ(gate_scale=4,linear_scale=25,clamp_limit=6),"
                      "routing=precomputed,arch=sm_120a",
                      0);
}
END_TEST

START_TEST(every_activation_compiles_at_sm90a)
{
    static const char *const acts[] = {"gelu", "relu", "silu", "geglu", "swiglu_step", "geglu_tanh", "identity",
                                       "swiglu(alpha=1.702,beta=1,limit=7)"};
    size_t n = mj_test_quick() ? 2 : sizeof acts / sizeof acts[0];
    for (size_t i = 0; i < n; i++) {
        char text[256];
        snprintf(text, sizeof text, "backend=mma,quant=bf16,act=%s,arch=sm_90a", acts[i]);
        compile_and_check(text, 0);
    }
}
END_TEST

/* Every W1 layout, bias and act_overrides value, gated and ungated, with and without activation
 * parameters, at sm_80 and sm_90a: a sample of the product in which every value appears; SASS
 * as for the plain layers. */
START_TEST(every_w1_layout_and_bias_compiles_without_spills)
{
    static const char *const specs[] = {
        "backend=mma,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),arch=sm_90a,w1_layout=interleaved,bias=both,"
        "routing=sigmoid_topk,act_overrides=per_expert",
        "backend=mma,quant=fp16,act=swiglu_step,arch=sm_80,w1_layout=gate_up,bias=b2,routing=deepseek_v3,"
        "n_group=4,topk_group=2,experts=64,topk=4,act_overrides=per_expert",
        "backend=mma,quant=bf16,act=gelu,arch=sm_80,w1_layout=interleaved,bias=b1,routing=llama4",
    };
    const size_t n = mj_test_quick() ? 1 : sizeof specs / sizeof specs[0];
    for (size_t i = 0; i < n; i++) compile_and_check(specs[i], 1);
}
END_TEST

START_TEST(w1_layout_and_biases_enter_the_source_only_where_they_differ)
{
    char *plain = source_of(BASE ",arch=sm_80");
    ck_assert_ptr_null(strstr(plain, "kW1Layout"));
    char *gate_up = source_of(BASE ",arch=sm_80,w1_layout=gate_up");
    char *b2 = source_of(BASE ",arch=sm_80,bias=b2");
    ck_assert_ptr_nonnull(strstr(gate_up, "constexpr W1Layout kW1Layout = W1Layout::gate_up;"));
    ck_assert_ptr_nonnull(strstr(b2, "constexpr bool kHasB1 = false;\nconstexpr bool kHasB2 = true;"));
    ck_assert_str_ne(gate_up, b2);
    free(plain), free(gate_up), free(b2);
}
END_TEST

static Suite *mma_emit_suite(void)
{
    Suite *s = suite_create("mma_emit");
    TCase *tc = tcase_create("mma_emit");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, source_is_deterministic_and_names_spec_and_kernels);
    tcase_add_test(tc, every_routing_method_emits_its_constants);
    tcase_add_test(tc, refuses_what_the_mma_templates_cannot_build_naming_the_field);
    tcase_add_test(tc, path_heuristic_follows_rows_per_expert_and_the_tile_field);
    tcase_add_test(tc, workspace_holds_the_intermediate_and_y_and_is_zero_for_no_tokens);
    tcase_add_test(tc, layers_compile_at_sm80_sm90a_sm120a_without_spills);
    tcase_add_test(tc, every_activation_compiles_at_sm90a);
    tcase_add_test(tc, w1_layout_and_biases_enter_the_source_only_where_they_differ);
    tcase_add_test(tc, every_w1_layout_and_bias_compiles_without_spills);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(mma_emit_suite)
