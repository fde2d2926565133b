/*
 * This file contains the CPU tests of the `wgmma` backend's fp8 layers (quant=fp8_tensor with
 * each fp8_act, quant=fp8_block; templates/wgmma_fp8.cuh): the generated source announces the
 * format only for fp8 (a 16-bit layer's source is unchanged), what the fp8 GEMMs cannot do is
 * refused naming the field, and every fp8 tuple (each activation scaling, gated and ungated
 * activations, every routing method, both dtypes) compiles with NVRTC for sm_90a into a cubin
 * holding every kernel without spills or stack and without ptxas' wgmma serialisation notes;
 * with a disassembler ($MOEJIT_NVDISASM, as check_wgmma_emit.c), the SASS of each of the eight
 * prefill GEMMs shows the fp8 warpgroup MMA (QGMMA: 8 per stage, 12 in the tall tiles), no
 * 16-bit one (HGMMA), TMA weight loads and no local memory, and the activations are quantized
 * where the design says (cp.async gathers of e4m3 rows, e4m3 conversions in the route kernel
 * and GEMM1's epilogue). The launch side (workspace, checks,
 * plan, tensor maps) is tested through the fake driver in check_launch.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "templates/common/mma_params.h"
#include "templates/common/wgmma_params.h"
#include "codegen/emit_backends.h"
#include "codegen/nvrtc_compile.h"
#include "core/spec.h"
#include "core/status.h"
#include "lib/check_main.h"
#include "lib/emit_test_util.h"

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
    moejit_status st = mj_emit(s, &src);
    ck_assert_msg(st == MOEJIT_OK, "emit '%s': %s", text, moejit_last_error());
    char *copy = strdup(src.text);
    mj_source_free(&src);
    moejit_spec_destroy(s);
    return copy;
}

static void refused(const char *text, const char *field)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    ck_assert_msg(mj_emit(s, &src) != MOEJIT_OK, "'%s' must be refused", text);
    ck_assert_msg(strstr(moejit_last_error(), field) != NULL, "'%s': message '%s' must name %s", text,
                  moejit_last_error(), field);
    moejit_spec_destroy(s);
}

START_TEST(fp8_source_names_its_format_and_16_bit_source_is_unchanged)
{
    char *a = source_of("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a");
    char *b = source_of("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a");
    ck_assert_str_eq(a, b);
    ck_assert_ptr_nonnull(strstr(a, "#define MJ_TC_QUANT_FP8 1\n"));
    ck_assert_ptr_nonnull(strstr(a, "constexpr Quant kQuant = Quant::fp8_block;\n"));
    ck_assert_ptr_nonnull(strstr(a, "constexpr Fp8Act kFp8Act = Fp8Act::tensor;\n"));
    ck_assert_ptr_nonnull(strstr(a, "#include \"wgmma_layer.cuh\""));
    static const struct { const char *fields, *want; } acts[] = {
        {"fp8_act=tensor", "Fp8Act::tensor;"}, {"fp8_act=token", "Fp8Act::token;"},
        {"fp8_act=static", "Fp8Act::static_scale;"}};
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++) {
        char text[160];
        snprintf(text, sizeof text, "backend=wgmma,quant=fp8_tensor,%s,act=swiglu,arch=sm_90a", acts[i].fields);
        char *c = source_of(text);
        ck_assert_ptr_nonnull(strstr(c, "constexpr Quant kQuant = Quant::fp8_tensor;\n"));
        ck_assert_ptr_nonnull(strstr(c, acts[i].want));
        ck_assert_str_ne(c, a);
        free(c);
    }
    /* 16-bit layers: not a line of it */
    char *d = source_of("backend=wgmma,quant=bf16,act=swiglu,arch=sm_90a");
    ck_assert_ptr_null(strstr(d, "MJ_TC_QUANT_FP8"));
    ck_assert_ptr_null(strstr(d, "kQuant"));
    free(d);
    free(b);
    free(a);
}
END_TEST

START_TEST(what_the_fp8_gemms_cannot_do_is_refused_naming_the_field)
{
    refused("backend=mma,quant=fp8_block,act=swiglu,arch=sm_90a", "quant");
    refused("backend=mma,quant=fp8_tensor,act=swiglu,arch=sm_89", "quant");
    refused("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a,tile=small", "tile");
    refused("backend=wgmma,quant=fp8_tensor,act=swiglu,arch=sm_90a,hidden=72", "hidden");
    refused("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a,inter=64", "inter");
    refused("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_90a,bias=b2", "bias");
    refused("backend=wgmma,quant=fp8_tensor,act=swiglu,arch=sm_90a,w1_layout=interleaved", "w1_layout");
    refused("backend=wgmma,quant=fp8_block,act=swiglu,arch=sm_100a", "arch");
}
END_TEST

static void compile(const char *text, mj_program *prog)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    ck_assert_int_eq(mj_emit_wgmma(s, &src), MOEJIT_OK);
    mj_compile_request req = {&src, mj_arch_target(s->arch), mj_embedded_headers, mj_embedded_headers_len, 600};
    moejit_status st = mj_nvrtc_compile(&req, prog);
    ck_assert_msg(st == MOEJIT_OK, "compile '%s': %s", text, moejit_last_error());
    mj_source_free(&src);
    moejit_spec_destroy(s);
}

/* No ptxas note of lost wgmma performance (C7508 setmaxnreg ignored, C7510 / C7511 / C7517 /
 * C7518 serialised or waits injected) anywhere in the log. */
static void no_wgmma_notes(const char *text, const char *log)
{
    static const char *const notes[] = {"C7508", "C7510", "C7511", "C7517", "C7518", "serialized"};
    for (const char *line = log; line && *line;) {
        const char *end = strchr(line, '\n');
        const size_t len = end ? (size_t)(end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf - 1 ? len : sizeof buf - 1), line);
        for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
            ck_assert_msg(!strstr(buf, notes[i]), "%s: ptxas reports %s: %s", text, notes[i], buf);
        line = end ? end + 1 : line + len;
    }
}

/* The eight prefill GEMMs: large, tall, pair and short tiles. */
static const char *const gemms[] = {"mj_gemm1_act",      "mj_gemm2",          "mj_gemm1_act_tall",
                                    "mj_gemm2_tall",     "mj_gemm1_act_pair", "mj_gemm2_pair",
                                    "mj_gemm1_act_short", "mj_gemm2_short"};
#define N_GEMMS ((int)(sizeof gemms / sizeof gemms[0]))

/* Where the activations are quantized (templates/wgmma_fp8.cuh, tc_fp8_quant.cuh): x copied
 * by the GEMM1 producers' cp.async (LDGSTS) for every fp8_act and fp8_block, never quantized
 * there; the route kernel converts to e4m3 (F2FP.SATFINITE.E4M3) for fp8_block and
 * fp8_act=token, the scatter kernel for fp8_act=tensor (x's one scale needs every route block
 * first); fp8_block's GEMM2 producers copy the intermediate but in the tall tiles of a gated
 * layer (64 columns of a group per GEMM1 tile), where they quantize it. */
static void check_quantization_sites(const char *text, const mj_program *prog)
{
    const int block = strstr(text, "fp8_block") != NULL, token = strstr(text, "fp8_act=token") != NULL;
    const int tensor = strstr(text, "fp8_act=tensor") != NULL;
    static const char *const names[] = {"mj_gemm1_act", "mj_gemm1_act_tall", "mj_gemm2", "mj_gemm2_tall", "mj_route",
                                        "mj_scatter"};
    int lines[6], ldgsts[6], local[6], clines[6], cvt[6], clocal[6];
    if (mj_test_sass_scan_op(prog, names, 6, "LDGSTS", lines, ldgsts, local) != 0 ||
        mj_test_sass_scan_op(prog, names, 6, "F2FP.SATFINITE.E4M3", clines, cvt, clocal) != 0)
        return;
    const int gated = strstr(text, "act=swiglu") || strstr(text, "act=geglu") || strstr(text, "act=situ");
    ck_assert_msg(ldgsts[0] >= 8 && ldgsts[1] >= 8, "%s: GEMM1 LDGSTS %d (tall %d)", text, ldgsts[0], ldgsts[1]);
    ck_assert_msg(block || cvt[0] == 0, "%s: GEMM1 has %d e4m3 conversions (x is copied)", text, cvt[0]);
    ck_assert_msg(tensor == (cvt[5] > 0), "%s: mj_scatter has %d e4m3 conversions", text, cvt[5]);
    ck_assert_msg(block ? ldgsts[2] >= 8 && (gated ? ldgsts[3] == 0 : ldgsts[3] >= 8) : ldgsts[2] == 0 && ldgsts[3] == 0,
                  "%s: GEMM2 LDGSTS %d (tall %d)", text, ldgsts[2], ldgsts[3]);
    ck_assert_msg((block || token) == (cvt[4] > 0), "%s: mj_route has %d e4m3 conversions", text, cvt[4]);
    ck_assert_msg(!block || cvt[0] > 0, "%s: fp8_block GEMM1 epilogue without e4m3 conversions", text);
}

/* QGMMA in every GEMM (a stage: two n128 halves x 4 k32 steps, or the tall tiles' two m64
 * blocks and a second copy of the loop body), no HGMMA, TMA loads, no local memory. */
static void check_sass(const char *text, const mj_program *prog)
{
    int lines[N_GEMMS], qgmma[N_GEMMS], local[N_GEMMS], hlines[N_GEMMS], hgmma[N_GEMMS], hlocal[N_GEMMS];
    int tlines[N_GEMMS], tma[N_GEMMS], tlocal[N_GEMMS];
    if (mj_test_sass_scan_op(prog, gemms, N_GEMMS, "QGMMA", lines, qgmma, local) != 0) {
        printf("SKIP: nvdisasm not found (set MOEJIT_NVDISASM): %s\n", text);
        return;
    }
    ck_assert_int_eq(mj_test_sass_scan_op(prog, gemms, N_GEMMS, "HGMMA", hlines, hgmma, hlocal), 0);
    ck_assert_int_eq(mj_test_sass_scan_op(prog, gemms, N_GEMMS, "UTMALDG", tlines, tma, tlocal), 0);
    for (int g = 0; g < N_GEMMS; g++) {
        printf("check_wgmma_fp8: %s %s: %d lines, QGMMA %d, HGMMA %d, UTMALDG %d, local %d\n", text, gemms[g],
               lines[g], qgmma[g], hgmma[g], tma[g], local[g]);
        ck_assert_msg(lines[g] > 0, "%s: no SASS for %s", text, gemms[g]);
        ck_assert_msg(qgmma[g] >= 8, "%s: %s has %d QGMMA (8 per stage at least)", text, gemms[g], qgmma[g]);
        ck_assert_msg(hgmma[g] == 0, "%s: %s has %d HGMMA", text, gemms[g], hgmma[g]);
        ck_assert_msg(tma[g] >= 1, "%s: %s has no TMA load", text, gemms[g]);
        ck_assert_msg(local[g] == 0, "%s: %s has %d local-memory instructions", text, gemms[g], local[g]);
    }
    check_quantization_sites(text, prog);
    fflush(stdout);
}

START_TEST(every_fp8_tuple_compiles_for_sm90a_with_qgmma_and_without_spills)
{
    /* each activation scaling, gated and ungated activations, every routing method, both
     * dtypes; the first two are the sanitizer run's sample */
    static const char *const tuples[] = {
        "quant=fp8_block,act=swiglu,routing=deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5",
        "quant=fp8_tensor,fp8_act=tensor,act=silu,routing=renormalize",
        "quant=fp8_tensor,fp8_act=token,act=geglu,routing=softmax_topk,logits=bf16",
        "quant=fp8_tensor,fp8_act=static,act=relu2,routing=sigmoid_topk,dtype=fp16",
        "quant=fp8_block,act=situ(gate_scale=4,linear_scale=25),routing=precomputed,dtype=fp16",
        "quant=fp8_block,act=gelu,routing=llama4",
        "quant=fp8_tensor,fp8_act=token,act=swiglu(alpha=1.702,beta=1,limit=7),routing=sigmoid_renorm",
    };
    const size_t n = mj_test_quick() ? 2 : sizeof tuples / sizeof tuples[0];
    for (size_t i = 0; i < n; i++) {
        char text[256];
        snprintf(text, sizeof text, "backend=wgmma,%s,arch=sm_90a", tuples[i]);
        mj_program prog;
        compile(text, &prog);
        const char *fail = mj_test_check_mma_program(text, &prog, 65536 / MJ_WGMMA_THREADS);
        ck_assert_msg(fail == NULL, "%s", fail);
        no_wgmma_notes(text, prog.log);
        check_sass(text, &prog);
        mj_program_free(&prog);
    }
}
END_TEST

static Suite *wgmma_fp8_suite(void)
{
    Suite *s = suite_create("wgmma_fp8");
    TCase *tc = tcase_create("wgmma_fp8");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, fp8_source_names_its_format_and_16_bit_source_is_unchanged);
    tcase_add_test(tc, what_the_fp8_gemms_cannot_do_is_refused_naming_the_field);
    tcase_add_test(tc, every_fp8_tuple_compiles_for_sm90a_with_qgmma_and_without_spills);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(wgmma_fp8_suite)
