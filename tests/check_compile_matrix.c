/*
 * This file contains the compile-matrix tests of the simt templates: NVRTC (through mj_emit
 * and mj_nvrtc_compile, one worker process per compile) builds every activation x {bf16,
 * fp16} at every arch, every (quant x activation x W1 layout) tuple at sm_90a, every quant at
 * every arch, and variants of routing, logits, fp8 activation scaling, int4 groups and zero
 * points, biases, pinned shapes and tiles, each into a cubin holding every kernel of the
 * layer; ptxas' resource report says no kernel spills and every block fits the 48 KiB of
 * static shared memory.
 *
 * The tensor-core backends compile every routing method (a sampled product: each method
 * on mma at sm_80 and sm_90a and on wgmma at sm_90a, logits and activation rotating) into
 * cubins of their whole kernel table without spills or stack (one known exception:
 * known_spill); with a disassembler ($MOEJIT_NVDISASM) no other kernel has local memory and
 * wgmma's large GEMMs show HGMMA.
 *
 * With MOEJIT_TEST_QUICK (sanitizer runs) a fixed sample of each matrix is compiled instead.
 * Compiles run on 2 threads: the machine has 2 cores shared with other work.
 */
#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/activation.h"
#include "templates/common/params.h"
#include "codegen/emit.h"
#include "lib/check_main.h"
#include "lib/emit_test_util.h"
#include "templates/common/mma_params.h"
#include "templates/common/wgmma_params.h"
#include "moejit.h"
#include "codegen/nvrtc_compile.h"
#include "core/program.h"
#include "core/spec.h"
#include "core/status.h"

#define MAX_CASES 512
#define COMPILE_THREADS 2

typedef struct compile_case {
    char spec[256];
    int check_resources; /* 1: also assert registers > 0, no spills, smem <= 48 KiB */
    int tensor_core;     /* an mma or wgmma layer: its kernel table, emit_test_util.h's checks */
    /* results, filled by the worker thread */
    moejit_status status;
    char error[1024];
    int kernels_ok;
    char detail[512];
} compile_case;

typedef struct case_list {
    compile_case cases[MAX_CASES];
    int n;
    int next; /* next case to compile, under lock */
    pthread_mutex_t lock;
} case_list;

static void add_case(case_list *l, int check_resources, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_case(case_list *l, int check_resources, const char *fmt, ...)
{
    ck_assert_int_lt(l->n, MAX_CASES);
    compile_case *c = &l->cases[l->n++];
    memset(c, 0, sizeof *c);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->spec, sizeof c->spec, fmt, ap);
    va_end(ap);
    c->check_resources = check_resources;
}

static int cubin_contains(const mj_program *p, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i + n <= p->cubin_len; i++)
        if (memcmp(p->cubin + i, name, n) == 0 && (i + n == p->cubin_len || p->cubin[i + n] == '\0'))
            return 1;
    return 0;
}

/* The one known exception: with deepseek_v3's group-limited selection and E given at run time
 * (route.cuh sized for 512 experts), ptxas keeps the deep persistent decode kernel at 128
 * registers and spills up to 8 bytes there; the shallow one and every other kernel stay clean. */
static int known_spill(const char *spec, const char *kernel)
{
    return strstr(spec, "routing=deepseek_v3") && !strstr(spec, "n_group=1,") && !strstr(spec, "experts=") &&
           strcmp(kernel, "mj_decode_persistent") == 0;
}

/* An mma-family layer: every kernel of its table, in order, without spills or stack (but
 * known_spill's, at most 8 bytes); with a disassembler, no local memory elsewhere and HGMMA
 * in wgmma's large GEMMs. */
static int check_tc_program(compile_case *c, const mj_program *p)
{
    const int wgmma = strstr(c->spec, "backend=wgmma") != NULL;
    static const char *const names[MJ_WGMMA_NUM_KERNELS] = {MJ_MMA_KERNEL_NAME_LIST, MJ_WGMMA_TALL_KERNEL_NAME_LIST};
    const int n = wgmma ? MJ_WGMMA_NUM_KERNELS : MJ_MMA_NUM_KERNELS;
    if (p->n_kernels != n) {
        snprintf(c->detail, sizeof c->detail, "%d kernels, the table has %d", p->n_kernels, n);
        return 0;
    }
    for (int i = 0; i < n; i++) {
        const mj_kernel_info *k = &p->kernels[i];
        const int limit = known_spill(c->spec, names[i]) ? 8 : 0;
        if (strcmp(k->name, names[i]) != 0 || !mj_test_cubin_contains(p, names[i]) || k->registers <= 0 ||
            k->spill_store_bytes > limit || k->spill_load_bytes > limit || k->stack_bytes > limit) {
            snprintf(c->detail, sizeof c->detail, "kernel %d %s (want %s): registers %d, spills %d/%d, stack %d", i,
                     k->name, names[i], k->registers, k->spill_store_bytes, k->spill_load_bytes, k->stack_bytes);
            return 0;
        }
    }
    int lines[MJ_WGMMA_NUM_KERNELS], hgmma[MJ_WGMMA_NUM_KERNELS], local[MJ_WGMMA_NUM_KERNELS];
    if (mj_test_sass_scan(p, names, n, lines, hgmma, local) != 0) return 1; /* no disassembler */
    for (int i = 0; i < n; i++) {
        const int large = i == MJ_MMA_K_GEMM1_ACT || i == MJ_MMA_K_GEMM2;
        if (lines[i] == 0 || (local[i] != 0 && !known_spill(c->spec, names[i])) || (wgmma && large && hgmma[i] < 4)) {
            snprintf(c->detail, sizeof c->detail, "%s SASS: %d lines, %d local-memory instructions, %d HGMMA",
                     names[i], lines[i], local[i], hgmma[i]);
            return 0;
        }
    }
    return 1;
}

/* Everything a compiled layer must satisfy; returns 0 and explains in c->detail otherwise. */
static int check_program(compile_case *c, const mj_source *src, const mj_program *p)
{
    if (c->tensor_core) return check_tc_program(c, p);
    static const char *const want[MJ_SIMT_NUM_KERNELS] = {MJ_SIMT_KERNEL_NAME_LIST};
    if (p->cubin_len < 4 || memcmp(p->cubin, "\177ELF", 4) != 0) {
        snprintf(c->detail, sizeof c->detail, "cubin lacks the ELF magic (%zu bytes)", p->cubin_len);
        return 0;
    }
    if (p->n_kernels != MJ_SIMT_NUM_KERNELS || src->n_kernels != MJ_SIMT_NUM_KERNELS) {
        snprintf(c->detail, sizeof c->detail, "n_kernels %d (source %d), want %d", p->n_kernels,
                 src->n_kernels, MJ_SIMT_NUM_KERNELS);
        return 0;
    }
    for (int i = 0; i < MJ_SIMT_NUM_KERNELS; i++) {
        const mj_kernel_info *k = &p->kernels[i];
        if (strcmp(k->name, want[i]) != 0 || !cubin_contains(p, want[i])) {
            snprintf(c->detail, sizeof c->detail, "kernel %d: '%s' (want %s, in cubin: %d)", i,
                     k->name, want[i], cubin_contains(p, want[i]));
            return 0;
        }
        if (!c->check_resources) continue;
        if (k->registers <= 0 || k->spill_store_bytes != 0 || k->spill_load_bytes != 0 ||
            k->shared_bytes < 0 || k->shared_bytes > 48 * 1024) {
            snprintf(c->detail, sizeof c->detail,
                     "%s: registers %d, spill stores %d, spill loads %d, smem %d (want registers > 0, "
                     "no spills, smem <= 49152)",
                     k->name, k->registers, k->spill_store_bytes, k->spill_load_bytes, k->shared_bytes);
            return 0;
        }
    }
    return 1;
}

static void compile_one(compile_case *c)
{
    moejit_spec *spec = NULL;
    mj_source src;
    mj_program prog;
    memset(&src, 0, sizeof src);
    memset(&prog, 0, sizeof prog);
    c->status = moejit_spec_parse(c->spec, &spec);
    if (c->status == MOEJIT_OK) c->status = mj_emit(spec, &src);
    if (c->status == MOEJIT_OK) {
        mj_compile_request req = {&src, mj_arch_target(spec->arch), mj_embedded_headers,
                                  mj_embedded_headers_len, 600};
        c->status = mj_nvrtc_compile(&req, &prog);
    }
    if (c->status != MOEJIT_OK)
        snprintf(c->error, sizeof c->error, "%s", moejit_last_error());
    else
        c->kernels_ok = check_program(c, &src, &prog);
    mj_program_free(&prog);
    mj_source_free(&src);
    moejit_spec_destroy(spec);
}

static void *compile_thread(void *arg)
{
    case_list *l = arg;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        int i = l->next < l->n ? l->next++ : -1;
        pthread_mutex_unlock(&l->lock);
        if (i < 0) return NULL;
        compile_one(&l->cases[i]);
    }
}

static void run_cases(case_list *l)
{
    pthread_t th[COMPILE_THREADS];
    pthread_mutex_init(&l->lock, NULL);
    l->next = 0;
    for (int t = 0; t < COMPILE_THREADS; t++) ck_assert_int_eq(pthread_create(&th[t], NULL, compile_thread, l), 0);
    for (int t = 0; t < COMPILE_THREADS; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&l->lock);
    int failed = 0;
    for (int i = 0; i < l->n; i++) {
        const compile_case *c = &l->cases[i];
        if (c->status != MOEJIT_OK)
            fprintf(stderr, "FAIL %s: %s: %.800s\n", c->spec, moejit_status_name(c->status), c->error);
        else if (!c->kernels_ok)
            fprintf(stderr, "FAIL %s: %s\n", c->spec, c->detail);
        failed += c->status != MOEJIT_OK || !c->kernels_ok;
    }
    ck_assert_msg(failed == 0, "%d of %d compiles failed (see stderr)", failed, l->n);
}

static const char *const quants[] = {"bf16", "fp16"};

/* The fixed quick sample: gated and ungated, both dtypes, oldest and newest archs. */
static int in_quick_sample(moejit_act_kind kind, int q, mj_arch arch)
{
    return (kind == MOEJIT_ACT_SWIGLU && q == 0 && arch == MJ_ARCH_SM90A) ||
           (kind == MOEJIT_ACT_SITU && q == 1 && arch == MJ_ARCH_SM80) ||
           (kind == MOEJIT_ACT_GELU && q == 0 && arch == MJ_ARCH_SM120A) ||
           (kind == MOEJIT_ACT_RELU2 && q == 1 && arch == MJ_ARCH_SM100A) ||
           (kind == MOEJIT_ACT_GEGLU_TANH && q == 0 && arch == MJ_ARCH_SM86) ||
           (kind == MOEJIT_ACT_IDENTITY && q == 1 && arch == MJ_ARCH_SM89);
}

START_TEST(every_activation_and_dtype_compiles_at_every_arch)
{
    static case_list l;
    l.n = 0;
    int quick = mj_test_quick();
    for (size_t a = 0; a < mj_act_table_len; a++)
        for (int q = 0; q < 2; q++)
            for (int arch = 0; arch < MJ_ARCH_COUNT; arch++) {
                moejit_act_kind kind = mj_act_table[a].kind;
                if (quick && !in_quick_sample(kind, q, (mj_arch)arch)) continue;
                add_case(&l, arch == MJ_ARCH_SM90A, "backend=simt,quant=%s,act=%s,arch=%s", quants[q],
                         mj_act_table[a].name, mj_arch_names[arch]);
            }
    ck_assert_int_eq(l.n, quick ? 6 : (int)mj_act_table_len * 2 * MJ_ARCH_COUNT);
    run_cases(&l);
}
END_TEST

static const char *const all_quants[] = {"bf16", "fp16", "fp8_tensor", "fp8_block", "w4a16", "mxfp4"};
#define N_QUANTS (int)(sizeof all_quants / sizeof all_quants[0])

/* The fixed quick sample of the quant x activation x layout matrix. */
static int in_quick_format_sample(int q, moejit_act_kind kind, mj_w1_layout layout)
{
    return (q == 2 && kind == MOEJIT_ACT_SWIGLU && layout == MJ_W1_UP_GATE) ||
           (q == 3 && kind == MOEJIT_ACT_SITU && layout == MJ_W1_GATE_UP) ||
           (q == 4 && kind == MOEJIT_ACT_RELU2 && layout == MJ_W1_INTERLEAVED) ||
           (q == 5 && kind == MOEJIT_ACT_SWIGLU_STEP && layout == MJ_W1_INTERLEAVED);
}

START_TEST(every_quant_activation_and_layout_compiles_at_sm90a)
{
    static case_list l;
    l.n = 0;
    int quick = mj_test_quick();
    for (int q = 0; q < N_QUANTS; q++)
        for (size_t a = 0; a < mj_act_table_len; a++)
            for (int w = 0; w < MJ_W1_LAYOUT_COUNT; w++) {
                moejit_act_kind kind = mj_act_table[a].kind;
                if (quick && !in_quick_format_sample(q, kind, (mj_w1_layout)w)) continue;
                add_case(&l, 1, "backend=simt,arch=sm_90a,quant=%s,act=%s,w1_layout=%s", all_quants[q],
                         mj_act_table[a].name, mj_w1_layout_names[w]);
            }
    ck_assert_int_eq(l.n, quick ? 4 : N_QUANTS * (int)mj_act_table_len * MJ_W1_LAYOUT_COUNT);
    run_cases(&l);
}
END_TEST

/* Every quant at every arch, each with a different activation, layout, routing and bias, so
 * that the per-arch sample also walks the other axes. */
START_TEST(every_quant_compiles_at_every_arch)
{
    static case_list l;
    l.n = 0;
    static const char *const acts[] = {"swiglu", "relu2", "situ", "geglu_tanh", "gelu", "swiglu_step"};
    static const char *const routings[] = {"renormalize", "sigmoid_topk", "sigmoid_renorm",
                                           "deepseek_v3,n_group=4,topk_group=2", "llama4", "precomputed"};
    static const char *const biases[] = {"none", "b1", "b2", "both"};
    int quick = mj_test_quick(), i = 0;
    for (int q = 0; q < N_QUANTS; q++)
        for (int arch = 0; arch < MJ_ARCH_COUNT; arch++, i++) {
            if (quick && (q + arch) % 6 != 0) continue;
            add_case(&l, arch == MJ_ARCH_SM90A, "backend=simt,arch=%s,quant=%s,act=%s,w1_layout=%s,routing=%s,bias=%s",
                     mj_arch_names[arch], all_quants[q], acts[i % 6], mj_w1_layout_names[i % 3],
                     routings[(i / 2) % 6], biases[i % 4]);
        }
    ck_assert_int_eq(l.n, quick ? 6 : N_QUANTS * MJ_ARCH_COUNT);
    run_cases(&l);
}
END_TEST

START_TEST(routings_logits_formats_pins_and_tiles_compile_without_spills)
{
    static case_list l;
    l.n = 0;
    const char *base = "backend=simt,arch=sm_90a";
    add_case(&l, 1, "%s,quant=bf16,act=swiglu,routing=softmax_topk", base);
    add_case(&l, 1, "%s,quant=fp16,act=silu,routing=precomputed", base);
    add_case(&l, 1, "%s,quant=bf16,act=geglu,routing=renormalize,logits=bf16", base);
    add_case(&l, 1, "%s,quant=bf16,act=swiglu(alpha=1.702,beta=1,limit=7),hidden=2880,inter=2880,"
                    "experts=128,topk=4", base);
    add_case(&l, 1, "%s,quant=fp16,act=situ(gate_scale=4,linear_scale=none,clamp_limit=8),tile=m64n64k32",
             base);
    add_case(&l, 1, "%s,quant=bf16,act=relu2,tile=m16n64k32,experts=8,topk=1", base);
    /* every routing method from bf16 logits */
    for (int r = 0; r < MJ_ROUTING_COUNT; r++)
        add_case(&l, 1, "%s,quant=bf16,act=swiglu,logits=bf16,routing=%s", base, mj_routing_names[r]);
    /* the real checkpoints' layers */
    add_case(&l, 1, "%s,quant=fp8_block,act=swiglu,routing=deepseek_v3,n_group=8,topk_group=4,"
                    "routed_scaling=2.5,hidden=7168,inter=2048,experts=256,topk=8", base);
    add_case(&l, 1, "%s,quant=w4a16,group=32,act=swiglu,routing=deepseek_v3,n_group=1,topk_group=1,"
                    "routed_scaling=2.827,experts=384,topk=8", base);
    add_case(&l, 1, "%s,quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),w1_layout=interleaved,bias=both,"
                    "hidden=2880,inter=2880,experts=128,topk=4", base);
    add_case(&l, 1, "%s,quant=fp16,act=relu2,routing=sigmoid_renorm,logits=bf16", base);
    add_case(&l, 1, "%s,quant=bf16,act=silu,routing=llama4,topk=1,experts=16", base);
    /* fp8 activation scaling, int4 groups and zero points, in fp16 too */
    add_case(&l, 1, "%s,quant=fp8_tensor,fp8_act=tensor,act=swiglu,dtype=fp16", base);
    add_case(&l, 1, "%s,quant=fp8_tensor,fp8_act=token,act=gelu", base);
    add_case(&l, 1, "%s,quant=fp8_tensor,fp8_act=static,act=situ,bias=both", base);
    add_case(&l, 1, "%s,quant=fp8_block,act=geglu,dtype=fp16,bias=b2", base);
    add_case(&l, 1, "%s,quant=w4a16,group=32,zero_point=1,act=swiglu,dtype=fp16", base);
    add_case(&l, 1, "%s,quant=w4a16,group=64,zero_point=0,act=relu2,bias=b1", base);
    add_case(&l, 1, "%s,quant=w4a16,group=128,zero_point=1,act=silu,w1_layout=interleaved", base);
    /* the quantized formats with every tile */
    add_case(&l, 1, "%s,quant=fp8_block,act=swiglu,tile=m64n64k32", base);
    add_case(&l, 1, "%s,quant=w4a16,zero_point=1,act=swiglu,tile=m64n64k32", base);
    add_case(&l, 1, "%s,quant=mxfp4,act=situ,tile=m16n64k32", base);
    add_case(&l, 1, "%s,quant=fp8_tensor,fp8_act=token,act=swiglu,tile=m64n64k32,bias=both", base);
    add_case(&l, 0, "backend=simt,arch=sm_80,quant=fp16,act=swiglu_step,routing=softmax_topk,tile=m64n64k32");
    if (mj_test_quick()) l.n = 3;
    run_cases(&l);
}
END_TEST

/* Every routing method on mma at sm_80 and sm_90a and on wgmma at sm_90a; logits, dtype and
 * activation rotate with the method, deepseek_v3 takes two groupings and llama4 a pinned k. */
START_TEST(every_routing_method_compiles_on_the_tensor_core_backends)
{
    static case_list l;
    l.n = 0;
    static const char *const routings[] = {"softmax_topk",
                                           "renormalize",
                                           "sigmoid_topk",
                                           "sigmoid_renorm",
                                           "deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5",
                                           "llama4,topk=1",
                                           "precomputed",
                                           "deepseek_v3,n_group=1,topk_group=1,routed_scaling=2.827,experts=384,topk=8"};
    static const char *const targets[] = {"backend=mma,arch=sm_80", "backend=mma,arch=sm_90a",
                                          "backend=wgmma,arch=sm_90a"};
    static const char *const acts[] = {"swiglu", "relu2", "situ", "gelu", "geglu_tanh"};
    const int n_routings = (int)(sizeof routings / sizeof routings[0]);
    int i = 0;
    for (int r = 0; r < n_routings; r++)
        for (int t = 0; t < 3; t++, i++) {
            /* quick: each target once, with the methods that add the most (grouping, top-1) */
            if (mj_test_quick() && !((r == 4 && t == 2) || (r == 5 && t == 0) || (r == 3 && t == 1))) continue;
            add_case(&l, 1, "%s,quant=%s,act=%s,routing=%s%s", targets[t], quants[i % 2], acts[i % 5], routings[r],
                     r != 6 && i % 2 ? ",logits=bf16" : "");
            l.cases[l.n - 1].tensor_core = 1;
        }
    ck_assert_int_eq(l.n, mj_test_quick() ? 3 : n_routings * 3);
    run_cases(&l);
}
END_TEST

static Suite *compile_matrix_suite(void)
{
    Suite *s = suite_create("compile_matrix");
    TCase *tc = tcase_create("compile_matrix");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, every_activation_and_dtype_compiles_at_every_arch);
    tcase_add_test(tc, every_quant_activation_and_layout_compiles_at_sm90a);
    tcase_add_test(tc, every_quant_compiles_at_every_arch);
    tcase_add_test(tc, routings_logits_formats_pins_and_tiles_compile_without_spills);
    suite_add_tcase(s, tc);
    TCase *tc_tc = tcase_create("tensor_core");
    tcase_set_timeout(tc_tc, 1200);
    tcase_add_test(tc_tc, every_routing_method_compiles_on_the_tensor_core_backends);
    suite_add_tcase(s, tc_tc);
    return s;
}

MJ_CHECK_MAIN(compile_matrix_suite)
