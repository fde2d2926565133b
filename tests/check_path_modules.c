/*
 * This file contains the tests of a tensor-core layer split into modules (codegen/
 * layer_modules.c, runtime/path_modules.c, runtime/kernel_modules.c): each forward takes the
 * modules of its path and only those, a module's source is the layer's with its mask, a module
 * compiled alone has the bytes it has when warmed with every other, and a forward on a stream
 * that is capturing a CUDA graph never compiles or loads (a fake driver, in a child process).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/build_inputs.h"
#include "codegen/layer_modules.h"
#include "core/settings.h"
#include "core/status.h"
#include "lib/check_main.h"
#include "lib/fake_cuda.h"
#include "runtime/context.h"
#include "runtime/launch.h"
#include "runtime/path_modules.h"
#include "templates/common/mma_params.h"
#include "templates/common/tc_modules.h"
#include "templates/common/wgmma_params.h"

#define WGMMA "backend=wgmma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a"
#define MMA90 "backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a"
#define MMA80 "backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_80"

static moejit_spec *spec_of(const char *text)
{
    moejit_spec *s = NULL;
    ck_assert_msg(moejit_spec_parse(text, &s) == MOEJIT_OK, "%s", moejit_last_error());
    return s;
}

/* Qwen3-30B-A3B's layer on T tokens. */
static moejit_moe_args qwen3_args(int64_t tokens)
{
    return (moejit_moe_args){.struct_size = sizeof(moejit_moe_args), .num_tokens = tokens, .hidden = 2048,
                             .inter = 768, .num_experts = 128, .topk = 8};
}

static void expect_modules(const moejit_spec *s, int64_t T, int sms, unsigned want)
{
    moejit_moe_args a = qwen3_args(T);
    const unsigned got = mj_path_modules_needed(s, &a, sms, MJ_DECODE_AUTO);
    char g[256], w[256];
    mj_path_modules_describe(got, g, sizeof g);
    mj_path_modules_describe(want, w, sizeof w);
    ck_assert_msg(got == want, "%s T=%lld sms=%d: modules %s, want %s", moejit_spec_canonical(s), (long long)T, sms, g, w);
}

START_TEST(each_path_takes_the_modules_of_its_launches_only)
{
    moejit_spec *w = spec_of(WGMMA), *m = spec_of(MMA90);
    const int unknown = MJ_GEMM_PLAN_SMS_UNKNOWN;
    for (int i = 0; i < 2; i++) {
        const moejit_spec *s = i ? m : w;
        expect_modules(s, 0, 132, 0);
        /* batch 1: the routed GEMM1, then GEMM2 + finalize in one kernel */
        expect_modules(s, 1, 132, MJ_TC_BIT_ROUTED | MJ_TC_BIT_T1);
        /* a few tokens: the persistent layer on the device, else the fused routing chain */
        expect_modules(s, 2, 132, MJ_TC_BIT_PERSISTENT);
        expect_modules(s, 4, 132, MJ_TC_BIT_PERSISTENT_SHALLOW);
        expect_modules(s, 4, unknown, MJ_TC_BIT_FUSED | MJ_TC_BIT_SMALL | MJ_TC_BIT_FINALIZE);
        expect_modules(s, 64, 132, MJ_TC_BIT_ROUTE | MJ_TC_BIT_SMALL | MJ_TC_BIT_FINALIZE);
    }
    /* prefill: wgmma's short tiles, then its pair path; mma's large path */
    expect_modules(w, 512, 132, MJ_TC_BIT_ROUTE | MJ_TC_BIT_SHORT | MJ_TC_BIT_FINALIZE);
    expect_modules(w, 4096, 132, MJ_TC_BIT_ROUTE | MJ_TC_BIT_PAIR | MJ_TC_BIT_FINALIZE);
    expect_modules(m, 4096, 132, MJ_TC_BIT_ROUTE | MJ_TC_BIT_LARGE | MJ_TC_BIT_FINALIZE);
    moejit_spec_destroy(w);
    moejit_spec_destroy(m);
}
END_TEST

/* ---- every launch comes from a module the plan names (a recording driver) --------------------- */

static int n_used, n_missing;
static void use(CUkernel k)
{
    n_used++;
    n_missing += k == NULL;
}
static CUresult rec_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                           unsigned smem, CUstream s, void **params, void **extra)
{
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s, (void)params, (void)extra;
    use((CUkernel)f);
    return CUDA_SUCCESS;
}
static CUresult rec_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)c, (void)params, (void)extra;
    use((CUkernel)f);
    return CUDA_SUCCESS;
}
static CUresult rec_set_attr(CUfunction_attribute a, int v, CUkernel k, CUdevice d)
{
    (void)a, (void)v, (void)d;
    use(k);
    return CUDA_SUCCESS;
}
static CUresult rec_get_function(CUfunction *f, CUkernel k)
{
    use(k);
    *f = (CUfunction)k;
    return CUDA_SUCCESS;
}
static CUresult rec_clusters(int *n, CUfunction f, const CUlaunchConfig *c)
{
    (void)f, (void)c;
    *n = 66;
    return CUDA_SUCCESS;
}
static CUresult rec_device(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
static CUresult rec_sms(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a, (void)d;
    *v = 132;
    return CUDA_SUCCESS;
}
static CUresult rec_memset(CUdeviceptr p, unsigned v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n, (void)s;
    return CUDA_SUCCESS;
}
static CUresult rec_map(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *base, const cuuint64_t *dims,
                        const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *es, CUtensorMapInterleave il,
                        CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob)
{
    (void)t, (void)rank, (void)base, (void)dims, (void)strides, (void)box, (void)es, (void)il, (void)sw, (void)l2, (void)oob;
    memset(m, 0, sizeof *m);
    return CUDA_SUCCESS;
}

/* A forward of T tokens of (H, I, E, k) whose module table holds only the kernels of the modules
 * its plan names (the others NULL): every kernel it touches must be there. */
static void launches_only_its_modules(const moejit_spec *s, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k)
{
    moejit_moe_args a = {.struct_size = sizeof(moejit_moe_args), .num_tokens = T, .hidden = H, .inter = I,
                         .num_experts = E, .topk = k};
    a.x = a.w1 = a.w2 = (const void *)(uintptr_t)0x60000000u;
    a.out = (void *)(uintptr_t)0x61000000u;
    if (s->routing == MJ_ROUTING_PRECOMPUTED)
        a.topk_ids = (const int32_t *)(uintptr_t)0x63000000u, a.topk_weights = (const float *)(uintptr_t)0x64000000u;
    else
        a.router_logits = (const void *)(uintptr_t)0x62000000u;
    mj_driver d;
    memset(&d, 0, sizeof d);
    d.cuLaunchKernel = rec_launch, d.cuLaunchKernelEx = rec_launch_ex, d.cuKernelSetAttribute = rec_set_attr;
    d.cuKernelGetFunction = rec_get_function, d.cuOccupancyMaxActiveClusters = rec_clusters;
    d.cuCtxGetDevice = rec_device, d.cuDeviceGetAttribute = rec_sms, d.cuMemsetD32Async = rec_memset;
    d.cuTensorMapEncodeTiled = rec_map;
    const unsigned need = mj_path_modules_needed(s, &a, 132, MJ_DECODE_AUTO);
    mj_module m;
    memset(&m, 0, sizeof m);
    m.n_kernels = MJ_MAX_KERNELS;
    for (int i = 0; i < MJ_MAX_KERNELS; i++)
        if (mj_layer_kernel_modules(s, i) & need) m.kernels[i] = (CUkernel)(uintptr_t)(i + 1);
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_OK);
    n_used = n_missing = 0;
    const mj_launch_knobs knobs = {MJ_DECODE_AUTO, MJ_PDL_ALL};
    const moejit_status st = mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, bytes, NULL, &knobs);
    char names[256];
    mj_path_modules_describe(need, names, sizeof names);
    ck_assert_msg(st == MOEJIT_OK, "%s T=%lld: %s", moejit_spec_canonical(s), (long long)T, moejit_last_error());
    ck_assert_msg(n_used > 0 && n_missing == 0, "%s T=%lld: %d of %d kernels touched are in none of %s",
                  moejit_spec_canonical(s), (long long)T, n_missing, n_used, names);
}

START_TEST(every_launch_comes_from_a_module_its_plan_names)
{
    static const char *const specs[] = {
        WGMMA, MMA90, "backend=wgmma,quant=bf16,act=relu2,routing=renormalize,arch=sm_90a",
        "backend=wgmma,quant=bf16,act=swiglu,routing=precomputed,arch=sm_90a",
        "backend=wgmma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a,tile=tall",
        "backend=wgmma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a,tile=large",
        "backend=mma,quant=fp16,act=gelu,routing=softmax_topk,arch=sm_80"};
    static const int64_t tokens[] = {1, 2, 3, 4, 8, 9, 16, 17, 64, 256, 512, 1024, 4096, 16384};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        moejit_spec *s = spec_of(specs[i]);
        for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
            launches_only_its_modules(s, tokens[t], 2048, 768, 128, 8); /* Qwen3-30B-A3B */
            launches_only_its_modules(s, tokens[t], 2688, 1856, 128, 6); /* Nemotron's k = 6 */
            launches_only_its_modules(s, tokens[t], 4096, 14336, 8, 2);  /* Mixtral-8x7B */
        }
        moejit_spec_destroy(s);
    }
}
END_TEST

START_TEST(every_kernel_is_in_a_module_and_each_module_source_names_its_own)
{
    moejit_spec *w = spec_of(WGMMA), *m = spec_of(MMA80), *simt = spec_of("backend=simt,quant=bf16,act=silu,arch=sm_90a");
    ck_assert_int_eq(mj_layer_module_count(w), MJ_TC_MOD_COUNT);
    ck_assert_int_eq(mj_layer_module_count(m), MJ_TC_MOD_MMA_COUNT);
    ck_assert_int_eq(mj_layer_module_count(simt), 0);
    ck_assert_int_eq(mj_layer_module_find(m, "pair"), -2); /* mma has no pair path */
    ck_assert_int_eq(mj_layer_module_find(w, "pair"), MJ_TC_MOD_PAIR);
    for (int k = 0; k < MJ_WGMMA_NUM_KERNELS; k++)
        ck_assert_msg(mj_layer_kernel_modules(w, k) != 0, "kernel %d of the wgmma table is in no module", k);
    mj_source whole, part;
    ck_assert_int_eq(mj_emit(w, &whole), MOEJIT_OK);
    ck_assert_ptr_null(strstr(whole.text, "MJ_TC_MODULES")); /* the whole layer: every kernel */
    for (int mod = 0; mod < MJ_TC_MOD_COUNT; mod++) {
        ck_assert_int_eq(mj_emit_module(w, mod, &part), MOEJIT_OK);
        char define[64];
        snprintf(define, sizeof define, "\n#define MJ_TC_MODULES 0x%04x\n#include \"wgmma_layer.cuh\"\n", 1u << mod);
        ck_assert_msg(strstr(part.text, define), "module %d: %s", mod, part.text + part.len - 200);
        /* the layer's source, but for the two lines before its last include */
        ck_assert_int_eq(strncmp(part.text, whole.text, strstr(whole.text, "\n#include \"wgmma_layer.cuh\"") - whole.text), 0);
        int idx[MJ_MAX_KERNELS];
        ck_assert_int_eq(part.n_kernels, mj_layer_module_kernels(w, mod, idx));
        for (int i = 0; i < part.n_kernels; i++) ck_assert_str_eq(part.kernel_names[i], whole.kernel_names[idx[i]]);
        mj_source_free(&part);
    }
    ck_assert_int_eq(mj_emit_module(w, MJ_TC_MOD_COUNT, &part), MOEJIT_ERR_INVALID_ARGUMENT);
    /* a module's inputs derived from the layer's (the runtime's way) have the key of its own emit */
    mj_build_inputs layer, derived, own;
    ck_assert_int_eq(mj_build_inputs_make(w, &layer), MOEJIT_OK);
    for (int mod = 0; mod < MJ_TC_MOD_COUNT; mod++) {
        ck_assert_int_eq(mj_build_inputs_for_module(&layer, w, mod, &derived), MOEJIT_OK);
        ck_assert_int_eq(mj_build_inputs_make_module(w, mod, mj_embedded_headers, mj_embedded_headers_len, &own), MOEJIT_OK);
        ck_assert_str_eq(derived.key.hex, own.key.hex);
        ck_assert_str_eq(derived.source.text, own.source.text);
        ck_assert_uint_eq(derived.n_headers, own.n_headers);
        mj_build_inputs_free(&derived);
        mj_build_inputs_free(&own);
    }
    mj_build_inputs_free(&layer);
    mj_source_free(&whole);
    moejit_spec_destroy(w);
    moejit_spec_destroy(m);
    moejit_spec_destroy(simt);
}
END_TEST

static moejit_context *new_context(void)
{
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_mode = "off"};
    moejit_context *ctx = NULL;
    ck_assert_msg(moejit_context_create(&opts, &ctx) == MOEJIT_OK, "%s", moejit_last_error());
    return ctx;
}

/* The t1 module compiled alone, on demand, and again while moejit_warm builds the layer's every
 * module in parallel (MOEJIT_TEST_QUICK: three of them at once): the same cubin, byte for byte. */
START_TEST(a_module_compiled_alone_has_the_bytes_it_has_in_the_warm_set)
{
    setenv("MOEJIT_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    moejit_spec *s = spec_of(MMA80);
    moejit_context *alone = new_context(), *warmed = new_context();
    moejit_kernel *a = NULL, *b = NULL;
    ck_assert_int_eq(moejit_kernel_get(alone, s, &a), MOEJIT_OK);
    ck_assert_int_eq(mj_context_compile_count(alone), 0); /* a tensor-core layer compiles per module */
    int compiled = 0;
    ck_assert_msg(mj_kernel_modules_build(a, 1u << MJ_TC_MOD_T1, 1, &compiled) == MOEJIT_OK, "%s", moejit_last_error());
    ck_assert_int_eq(compiled, 1);
    ck_assert_uint_eq(atomic_load(&a->ready_modules), 1u << MJ_TC_MOD_T1);
    if (mj_test_quick()) {
        ck_assert_int_eq(moejit_kernel_get(warmed, s, &b), MOEJIT_OK);
        const unsigned three = MJ_TC_BIT_ROUTED | MJ_TC_BIT_T1 | MJ_TC_BIT_FINALIZE;
        ck_assert_msg(mj_kernel_modules_build(b, three, 3, &compiled) == MOEJIT_OK, "%s", moejit_last_error());
        ck_assert_int_eq(compiled, 3);
    } else {
        const moejit_spec *specs[] = {s};
        ck_assert_msg(moejit_warm(warmed, specs, 1, 2, NULL, NULL, NULL) == MOEJIT_OK, "%s", moejit_last_error());
        ck_assert_int_eq(moejit_kernel_get(warmed, s, &b), MOEJIT_OK);
        ck_assert_uint_eq(atomic_load(&b->ready_modules), mj_kernel_modules_all(b));
        ck_assert_int_eq(mj_context_compile_count(warmed), MJ_TC_MOD_MMA_COUNT);
    }
    const mj_program *pa = &a->modules[MJ_TC_MOD_T1].program, *pb = &b->modules[MJ_TC_MOD_T1].program;
    ck_assert_uint_gt(pa->cubin_len, 0);
    ck_assert_uint_eq(pa->cubin_len, pb->cubin_len);
    ck_assert_msg(memcmp(pa->cubin, pb->cubin, pa->cubin_len) == 0, "the t1 module's cubin differs");
    /* its kernel's resources are known now; another module's are not yet (without QUICK: all are) */
    moejit_kernel_resources r;
    ck_assert_int_eq(moejit_kernel_resources_get(a, MJ_MMA_K_GEMM2_FINALIZE_T1, &r), MOEJIT_OK);
    ck_assert_str_eq(r.name, "mj_gemm2_finalize_t1");
    ck_assert_int_gt(r.registers, 0);
    ck_assert_int_eq(moejit_kernel_resources_get(a, MJ_MMA_K_ROUTE, &r), MOEJIT_OK);
    ck_assert_str_eq(r.name, "mj_route");
    ck_assert_int_eq(r.registers, -1);
    ck_assert_int_eq(moejit_kernel_count(a), MJ_MMA_NUM_KERNELS);
    moejit_context_destroy(alone);
    moejit_context_destroy(warmed);
    moejit_spec_destroy(s);
}
END_TEST

/* ---- CUDA-graph capture (fake driver, child process) --------------------------------------- */

static const char *forward_status(moejit_kernel *k, int64_t T, moejit_status *st)
{
    moejit_moe_args a = qwen3_args(T);
    void *dev = (void *)(uintptr_t)0x60000000u; /* never dereferenced: the fake driver launches nothing */
    a.w1 = dev, a.w2 = dev, a.x = dev, a.out = dev, a.router_logits = dev;
    size_t bytes = 0;
    MJ_EXPECT(moejit_workspace_size(k, &a, &bytes) == MOEJIT_OK, "%s", moejit_last_error());
    *st = moejit_moe_forward(k, &a, (void *)(uintptr_t)0x70000000u, bytes, NULL);
    return NULL;
}

static const char *body_capture_never_compiles(void)
{
    const char *lib = mj_test_fake_libcuda();
    MJ_EXPECT(lib != NULL, "the fake libcuda could not be built");
    setenv("MOEJIT_LIBCUDA", lib, 1);
    unsetenv("FAKE_CUDA");
    setenv("FAKE_CUDA_CC", "90", 1);
    moejit_options opts = {.struct_size = sizeof(moejit_options), .cache_mode = "off"};
    moejit_context *ctx = NULL;
    MJ_EXPECT(moejit_context_create(&opts, &ctx) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_spec *s = NULL;
    MJ_EXPECT(moejit_spec_parse(MMA90, &s) == MOEJIT_OK, "%s", moejit_last_error());
    moejit_kernel *k = NULL;
    MJ_EXPECT(moejit_kernel_get(ctx, s, &k) == MOEJIT_OK, "%s", moejit_last_error());
    MJ_EXPECT(moejit_kernel_is_loaded(k), "a sm_90a layer on a 9.0 device is not loaded");
    moejit_status st;
    const char *f;

    /* capturing, batch 1's modules missing: refused, naming them; nothing compiled or loaded */
    setenv("FAKE_CUDA_CAPTURING", "1", 1);
    if ((f = forward_status(k, 1, &st))) return f;
    MJ_EXPECT(st == MOEJIT_ERR_NOT_WARMED, "capturing forward: %s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(strstr(moejit_last_error(), "routed, t1") && strstr(moejit_last_error(), "moejit_warm"), "%s",
              moejit_last_error());
    MJ_EXPECT(mj_context_compile_count(ctx) == 0, "compiled %ld during a capture", mj_context_compile_count(ctx));
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 0, "a library was loaded during a capture");
    MJ_EXPECT(mj_test_fake_counter("fake_launches") == 0, "launched without its modules");

    /* not capturing: the forward builds its two modules, loads them, launches its two kernels */
    setenv("FAKE_CUDA_CAPTURING", "0", 1);
    if ((f = forward_status(k, 1, &st))) return f;
    MJ_EXPECT(st == MOEJIT_OK, "forward: %s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(mj_context_compile_count(ctx) == 2, "compiles: %ld, want 2", mj_context_compile_count(ctx));
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 2, "libraries: %d", mj_test_fake_counter("fake_libraries_loaded"));
    MJ_EXPECT(mj_test_fake_counter("fake_launches") == 2, "launches: %d", mj_test_fake_counter("fake_launches"));

    /* capturing again, the path loaded: launches as normal, nothing built */
    setenv("FAKE_CUDA_CAPTURING", "1", 1);
    if ((f = forward_status(k, 1, &st))) return f;
    MJ_EXPECT(st == MOEJIT_OK, "captured forward: %s: %s", moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(mj_context_compile_count(ctx) == 2, "compiled during a capture");
    MJ_EXPECT(mj_test_fake_counter("fake_launches") == 4, "launches: %d", mj_test_fake_counter("fake_launches"));
    /* another batch size's path is still refused */
    if ((f = forward_status(k, 4, &st))) return f;
    MJ_EXPECT(st == MOEJIT_ERR_NOT_WARMED && strstr(moejit_last_error(), "persistent_shallow"), "%s: %s",
              moejit_status_name(st), moejit_last_error());
    MJ_EXPECT(mj_context_compile_count(ctx) == 2, "compiled during a capture");
    moejit_context_destroy(ctx);
    MJ_EXPECT(mj_test_fake_counter("fake_libraries_loaded") == 0, "destroy left a module loaded");
    moejit_spec_destroy(s);
    return NULL;
}

START_TEST(a_capturing_forward_never_compiles_and_a_loaded_path_launches)
{
    const char *failure = mj_test_in_child(body_capture_never_compiles);
    ck_assert_msg(failure == NULL, "%s", failure);
}
END_TEST

static Suite *path_modules_suite(void)
{
    Suite *s = suite_create("path_modules");
    TCase *plan = tcase_create("plan");
    tcase_add_test(plan, each_path_takes_the_modules_of_its_launches_only);
    tcase_add_test(plan, every_kernel_is_in_a_module_and_each_module_source_names_its_own);
    tcase_add_test(plan, every_launch_comes_from_a_module_its_plan_names);
    suite_add_tcase(s, plan);
    TCase *compile = tcase_create("compile");
    tcase_set_timeout(compile, 900);
    /* first: the driver loads once per process, and under CK_FORK=no the next test's missing
     * driver would be the child's too */
    tcase_add_test(compile, a_capturing_forward_never_compiles_and_a_loaded_path_launches);
    tcase_add_test(compile, a_module_compiled_alone_has_the_bytes_it_has_in_the_warm_set);
    suite_add_tcase(s, compile);
    return s;
}

MJ_CHECK_MAIN(path_modules_suite)
