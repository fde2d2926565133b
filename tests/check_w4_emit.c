/*
 * This file contains the CPU tests of the tensor-core backends' 4-bit layers (quant w4a16 and
 * mxfp4 on mma and wgmma): their source is deterministic, names the format's constants and the
 * 4-bit layer header, and leaves the 16-bit source unchanged; what they cannot build is refused
 * naming the field; and every 4-bit tuple (group 32/64/128 with and without zero points, mxfp4;
 * bf16 and fp16) compiles with NVRTC for mma at sm_80 and sm_90a and for wgmma at sm_90a into a
 * cubin of the layer's whole kernel table with no spills and no stack frame, whose GEMM kernels
 * hold tensor-core MMAs (HMMA.16816; HGMMA in wgmma's large GEMMs), 16-byte cp.async (LDGSTS)
 * and no local memory in their SASS when the disassembler is found (MOEJIT_NVDISASM, as
 * `make test` sets it).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "templates/common/mma_params.h"
#include "templates/common/wgmma_params.h"
#include "codegen/emit_backends.h"
#include "codegen/nvrtc_compile.h"
#include "lib/check_main.h"
#include "lib/emit_test_util.h"
#include "core/matrix.h"
#include "core/spec.h"
#include "core/status.h"

static moejit_spec *parse_ok(const char *text)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse(text, &s);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

static moejit_status emit(const moejit_spec *s, mj_source *src)
{
    return s->backend == MJ_BACKEND_WGMMA ? mj_emit_wgmma(s, src) : mj_emit_mma(s, src);
}

static char *source_of(const char *text)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    ck_assert_msg(emit(s, &src) == MOEJIT_OK, "emit '%s': %s", text, moejit_last_error());
    char *copy = strdup(src.text);
    mj_source_free(&src);
    moejit_spec_destroy(s);
    return copy;
}

START_TEST(source_names_the_format_and_the_4bit_layer)
{
    char *a = source_of("backend=mma,quant=w4a16,group=64,zero_point=1,act=silu,arch=sm_80");
    char *b = source_of("backend=mma,quant=w4a16,group=64,zero_point=1,act=silu,arch=sm_80");
    ck_assert_str_eq(a, b);
    ck_assert_ptr_nonnull(strstr(a, "constexpr Quant kQuant = Quant::w4a16;\nconstexpr int kInt4Group = 64;\n"
                                    "constexpr bool kInt4Zero = true;\n"));
    ck_assert_ptr_nonnull(strstr(a, "#include \"mma_w4_layer.cuh\""));
    char *c = source_of("backend=mma,quant=w4a16,group=128,act=silu,arch=sm_80");
    ck_assert_ptr_nonnull(strstr(c, "constexpr int kInt4Group = 128;\nconstexpr bool kInt4Zero = false;\n"));
    char *d = source_of("backend=wgmma,quant=mxfp4,dtype=fp16,act=silu,arch=sm_90a");
    ck_assert_ptr_nonnull(strstr(d, "constexpr Quant kQuant = Quant::mxfp4;"));
    ck_assert_ptr_nonnull(strstr(d, "large: wgmma's, dequantizing into its 16-bit stages"));
    ck_assert_ptr_nonnull(strstr(d, "// tile=auto: the 4-bit small, large, tall and pair paths are compiled"));
    ck_assert_ptr_nonnull(strstr(d, "#include \"wgmma_w4_layer.cuh\""));
    static const char *const names[MJ_WGMMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST, MJ_WGMMA_TALL_KERNEL_NAME_LIST};
    for (int i = 0; i < MJ_WGMMA_NUM_KERNELS; i++) ck_assert_ptr_nonnull(strstr(d, names[i]));
    /* the 16-bit layers' source names no weight format (it is as it was) */
    char *e = source_of("backend=mma,quant=bf16,act=silu,arch=sm_80");
    ck_assert_ptr_null(strstr(e, "kQuant"));
    ck_assert_ptr_nonnull(strstr(e, "#include \"mma_layer.cuh\""));
    free(a), free(b), free(c), free(d), free(e);
}
END_TEST

START_TEST(every_routing_method_emits_its_constants)
{
    mj_test_routing_constants("backend=mma,quant=mxfp4,act=swiglu,arch=sm_90a", source_of);
    mj_test_routing_constants("backend=wgmma,quant=w4a16,act=swiglu,arch=sm_90a", source_of);
}
END_TEST

static void refused(const char *text, const char *field)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    ck_assert_msg(emit(s, &src) != MOEJIT_OK, "'%s' must be refused", text);
    ck_assert_msg(strstr(moejit_last_error(), field) != NULL, "'%s': message '%s' must name %s", text,
                  moejit_last_error(), field);
    moejit_spec_destroy(s);
}

START_TEST(refuses_what_the_4bit_layers_cannot_build_naming_the_field)
{
    refused("backend=mma,quant=w4a16,act=swiglu,tile=tall,arch=sm_80", "tile: backend mma knows auto, large, small; got tall");
    refused("backend=mma,quant=mxfp4,act=swiglu,tile=pair,arch=sm_90a", "tile: backend mma knows auto, large, small; got pair");
    refused("backend=mma,quant=w4a16,group=128,act=swiglu,hidden=192,arch=sm_80", "hidden: quant=w4a16 needs a multiple of 128");
    refused("backend=mma,quant=w4a16,group=64,zero_point=1,act=swiglu,inter=192,arch=sm_80",
            "inter: quant=w4a16 with zero points needs a multiple of 128");
    refused("backend=mma,quant=mxfp4,act=swiglu,inter=48,arch=sm_80", "inter: quant=mxfp4 needs a multiple of 32");
    refused("backend=wgmma,quant=mxfp4,act=swiglu,arch=sm_80", "arch");
}
END_TEST

/* wgmma's 4-bit layers take every tile of its 16-bit ones but the short tiles, which no tile
 * names: the pair path among them. */
START_TEST(wgmma_4bit_layers_take_the_pair_tiles)
{
    static const char *const tiles[] = {"auto", "small", "large", "tall", "pair"};
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        char text[128];
        snprintf(text, sizeof text, "backend=wgmma,quant=mxfp4,act=swiglu,tile=%s,arch=sm_90a", tiles[i]);
        char *src = source_of(text);
        ck_assert_ptr_nonnull(strstr(src, "the 4-bit small, large, tall and pair paths are compiled"));
        free(src);
    }
}
END_TEST

/* ---- compiles ---------------------------------------------------------------------------- */

/* The GEMM kernels a 4-bit layer runs (tc_layer_stages.cuh, mma_layer.cuh; the last four, the
 * tall and the pair tiles, wgmma's only: wgmma_w4_layer.cuh). */
static const char *const kGemms[] = {"mj_gemm1_act",       "mj_gemm2",
                                     "mj_gemm1_act_small", "mj_gemm2_small",
                                     "mj_gemm1_act_small_routed", "mj_decode_persistent",
                                     "mj_gemm1_act_tall", "mj_gemm2_tall",
                                     "mj_gemm1_act_pair", "mj_gemm2_pair"};
enum { N_GEMMS = sizeof kGemms / sizeof kGemms[0], N_MMA_GEMMS = N_GEMMS - 4, FIRST_PAIR = N_GEMMS - 2 };

/* Whether GEMM i of a wgmma layer runs warpgroup MMAs (the large, tall and pair GEMMs). */
static int warpgroup_gemm(int i) { return i < 2 || i >= N_MMA_GEMMS; }

/* Per GEMM kernel: SASS lines with its tensor-core MMA (HMMA.16816; HGMMA in a wgmma layer's
 * large GEMMs), LDGSTS, local memory and (the pair GEMMs' half-tile copy into the other CTA)
 * shared-to-shared bulk copies; -1 without nvdisasm. */
static int sass_counts(const mj_program *p, int wgmma, int *hmma, int *ldgsts, int *local, int *bulk)
{
    const char *tool = getenv("MOEJIT_NVDISASM");
    if (!tool || !*tool || access(tool, X_OK) != 0) return -1;
    char path[] = "/tmp/moejit-w4-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, p->cubin, p->cubin_len), (ssize_t)p->cubin_len);
    close(fd);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "'%s' -c %s 2>/dev/null", tool, path);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < N_GEMMS; i++) hmma[i] = ldgsts[i] = local[i] = bulk[i] = 0;
    char line[4096];
    int in = -1;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, ".section") && strstr(line, ".text.")) {
            in = -1;
            for (int i = 0; i < N_GEMMS; i++) {
                char want[128];
                snprintf(want, sizeof want, ".text.%s,", kGemms[i]);
                if (strstr(line, want)) in = i;
            }
        }
        if (in < 0) continue;
        /* wgmma's large and tall GEMMs run warpgroup MMAs, every other GEMM mma.sync */
        hmma[in] += strstr(line, wgmma && warpgroup_gemm(in) ? "HGMMA.64x" : "HMMA.16816.F32") != NULL;
        ldgsts[in] += strstr(line, "LDGSTS") != NULL;
        local[in] += strstr(line, " LDL") != NULL || strstr(line, " STL") != NULL;
        bulk[in] += strstr(line, "UBLKCP.S.S") != NULL;
    }
    pclose(f);
    unlink(path);
    return 0;
}

static void compile_and_check(const char *text)
{
    moejit_spec *s = parse_ok(text);
    mj_source src;
    mj_program prog;
    memset(&prog, 0, sizeof prog);
    ck_assert_int_eq(emit(s, &src), MOEJIT_OK);
    mj_compile_request req = {&src, mj_arch_target(s->arch), mj_embedded_headers, mj_embedded_headers_len, 600};
    moejit_status st = mj_nvrtc_compile(&req, &prog);
    ck_assert_msg(st == MOEJIT_OK, "compile '%s': %s", text, moejit_last_error());
    /* the register bounds are the launch bounds' (mma's 4-bit large GEMMs two CTAs per SM,
     * wgmma's one, with setmaxnreg): ptxas holds them, and a spill fails below */
    const char *fail = mj_test_check_mma_program(text, &prog, 255);
    ck_assert_msg(fail == NULL, "%s", fail);
    int hmma[N_GEMMS], ldgsts[N_GEMMS], local[N_GEMMS], bulk[N_GEMMS];
    if (sass_counts(&prog, s->backend == MJ_BACKEND_WGMMA, hmma, ldgsts, local, bulk) == 0) {
        char report[1024];
        int at = snprintf(report, sizeof report, "w4 %s:", text);
        for (int i = 0; i < (s->backend == MJ_BACKEND_WGMMA ? N_GEMMS : N_MMA_GEMMS); i++) {
            ck_assert_msg(hmma[i] > 0 && ldgsts[i] > 0 && local[i] == 0, "%s %s SASS: MMA %d, LDGSTS %d, local %d",
                          text, kGemms[i], hmma[i], ldgsts[i], local[i]);
            ck_assert_msg((i >= FIRST_PAIR) == (bulk[i] > 0), "%s %s SASS: %d shared-to-shared bulk copies", text,
                          kGemms[i], bulk[i]);
            for (int k = 0; k < prog.n_kernels; k++)
                if (!strcmp(prog.kernels[k].name, kGemms[i]) && at < (int)sizeof report)
                    at += snprintf(report + at, sizeof report - (size_t)at, " %s MMA %d regs %d;", kGemms[i], hmma[i],
                                   prog.kernels[k].registers);
        }
        fprintf(stderr, "%s\n", report);
    } else {
        fprintf(stderr, "check_w4_emit: no nvdisasm (set MOEJIT_NVDISASM): SASS not inspected\n");
    }
    mj_program_free(&prog);
    mj_source_free(&src);
    moejit_spec_destroy(s);
}

/* Every 4-bit format on every (backend, arch) the matrix builds it for, each dtype on each. */
START_TEST(every_4bit_tuple_compiles_without_spills_with_hmma)
{
    static const char *const formats[] = {
        "quant=w4a16,group=32",  "quant=w4a16,group=64",  "quant=w4a16,group=128", "quant=w4a16,group=32,zero_point=1",
        "quant=w4a16,group=64,zero_point=1", "quant=w4a16,group=128,zero_point=1", "quant=mxfp4"};
    static const char *const targets[] = {"backend=mma,arch=sm_80", "backend=mma,arch=sm_90a", "backend=wgmma,arch=sm_90a"};
    static const char *const dtypes[] = {"bf16", "fp16"};
    int n = 0;
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++)
        for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++)
            for (size_t d = 0; d < 2; d++, n++) {
                if (mj_test_quick() && n % 9 != 0) continue; /* the sanitizer run: a sample */
                /* each (target, format) in one dtype, alternating: every dtype on every target */
                if (!mj_test_quick() && (t + f) % 2 != d) continue;
                char text[256];
                snprintf(text, sizeof text, "%s,%s,dtype=%s,act=swiglu", targets[t], formats[f], dtypes[d]);
                compile_and_check(text);
            }
}
END_TEST

/* Every activation and routing method of the 16-bit layers, in a 4-bit layer. */
START_TEST(every_activation_and_routing_method_compiles)
{
    static const char *const acts[] = {"gelu", "relu", "silu", "geglu", "relu2", "swiglu_step", "geglu_tanh", "identity",
                                       "situ(gate_scale=4,linear_scale=25,clamp_limit=6)",
                                       "swiglu(alpha=1.702,beta=1,limit=7)"};
    static const char *const routings[] = {"softmax_topk", "sigmoid_topk", "sigmoid_renorm",
                                           "deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5", "llama4,topk=1",
                                           "precomputed,logits=bf16", "renormalize"};
    const size_t na = mj_test_quick() ? 1 : sizeof acts / sizeof acts[0];
    for (size_t i = 0; i < na; i++) {
        char text[256];
        snprintf(text, sizeof text, "backend=mma,quant=mxfp4,act=%s,routing=%s,arch=sm_90a", acts[i],
                 routings[i % (sizeof routings / sizeof routings[0])]);
        compile_and_check(text);
    }
}
END_TEST

/* The W1 layouts, biases and per-expert overrides of the 16-bit layers, in 4-bit layers (their
 * GEMMs store through the 16-bit epilogues): gpt-oss's exact layer among them. Supported and
 * validated (the GPU suite on the H200), and each compiles without spills. */
START_TEST(layouts_biases_and_overrides_compile_in_4bit_layers)
{
    static const char *const specs[] = {
        "backend=wgmma,quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),w1_layout=interleaved,bias=both,arch=sm_90a",
        "backend=mma,quant=w4a16,group=64,zero_point=1,dtype=fp16,act=swiglu,w1_layout=gate_up,bias=b1,"
        "act_overrides=per_expert,arch=sm_80",
        "backend=wgmma,quant=w4a16,group=32,zero_point=1,act=situ(gate_scale=4,linear_scale=25,clamp_limit=6),"
        "bias=both,act_overrides=per_expert,arch=sm_90a",
        "backend=mma,quant=mxfp4,act=geglu,w1_layout=interleaved,bias=b2,arch=sm_90a"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        moejit_spec *s = parse_ok(specs[i]);
        ck_assert_msg(mj_check_support(s) == MOEJIT_OK && mj_check_validated(s, 0) == MOEJIT_OK, "%s: %s", specs[i],
                      moejit_last_error());
        moejit_spec_destroy(s);
        if (!mj_test_quick() || i == 0) compile_and_check(specs[i]);
    }
}
END_TEST

static Suite *w4_emit_suite(void)
{
    Suite *s = suite_create("w4_emit");
    TCase *tc = tcase_create("w4_emit");
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, source_names_the_format_and_the_4bit_layer);
    tcase_add_test(tc, every_routing_method_emits_its_constants);
    tcase_add_test(tc, refuses_what_the_4bit_layers_cannot_build_naming_the_field);
    tcase_add_test(tc, wgmma_4bit_layers_take_the_pair_tiles);
    tcase_add_test(tc, every_4bit_tuple_compiles_without_spills_with_hmma);
    tcase_add_test(tc, every_activation_and_routing_method_compiles);
    tcase_add_test(tc, layouts_biases_and_overrides_compile_in_4bit_layers);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(w4_emit_suite)
