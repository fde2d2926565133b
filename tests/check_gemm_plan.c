/*
 * This file checks the tensor-core launch plan (runtime/gemm_plan.c) in one place: the path
 * per T bucket of the Qwen3-30B-A3B and Mixtral-8x7B shapes on mma and wgmma, the persistent
 * decode layer and its shallow blocks at T = 1..8, the decode modes, a tuning-table override,
 * and that a forward through a recording driver enqueues exactly the kernels, grids and
 * parameters its plan names.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "templates/common/mma_params.h"
#include "templates/common/mma_w4_params.h"
#include "templates/common/params.h"
#include "templates/common/wgmma_params.h"
#include "lib/check_main.h"
#include "core/spec.h"
#include "core/status.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch.h"
#include "runtime/tune_table.h"

#define MMA "backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a"
#define WGMMA "backend=wgmma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a"
#define SMS 132

/* ---- a recording driver ------------------------------------------------------------------ */

typedef struct rec {
    int kernel;
    unsigned gx, smem;
    int splits, max_tiles;
} rec;

static rec recs[16];
static int n_recs, n_memsets;

static void record(CUfunction f, unsigned gx, unsigned smem, void **params)
{
    ck_assert_int_lt(n_recs, 16);
    const mj_layer_params *p = params[0];
    recs[n_recs++] = (rec){(int)((uintptr_t)f - 1), gx, smem, p->gemm2_splits, p->max_tiles};
}
static CUresult fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)s, (void)extra;
    record(f, gx, smem, params);
    return CUDA_SUCCESS;
}
static CUresult fake_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    (void)extra;
    record(f, c->gridDimX, c->sharedMemBytes, params);
    return CUDA_SUCCESS;
}
static CUresult fake_memset(CUdeviceptr p, unsigned v, size_t n, CUstream s)
{
    (void)p, (void)v, (void)n, (void)s;
    n_memsets++;
    return CUDA_SUCCESS;
}
static CUresult fake_ctx_device(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
static CUresult fake_set_attr(CUfunction_attribute a, int v, CUkernel k, CUdevice d)
{
    (void)a, (void)v, (void)k, (void)d;
    return CUDA_SUCCESS;
}
static CUresult fake_sm_count(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a, (void)d;
    *v = SMS;
    return CUDA_SUCCESS;
}
static CUresult fake_get_function(CUfunction *f, CUkernel k) { *f = (CUfunction)k; return CUDA_SUCCESS; }
static CUresult fake_max_clusters(int *n, CUfunction f, const CUlaunchConfig *c)
{
    (void)f, (void)c;
    *n = SMS / 2;
    return CUDA_SUCCESS;
}
static CUresult fake_encode(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *base, const cuuint64_t *dims,
                            const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *es,
                            CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                            CUtensorMapFloatOOBfill oob)
{
    (void)t, (void)rank, (void)base, (void)dims, (void)strides, (void)box, (void)es, (void)il, (void)sw, (void)l2,
        (void)oob;
    memset(m, 0, sizeof *m);
    return CUDA_SUCCESS;
}

static moejit_spec *spec_of(const char *text)
{
    moejit_spec *s = NULL;
    ck_assert_msg(moejit_spec_parse(text, &s) == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

static const void *dev(int n) { return (const void *)(uintptr_t)(0x10000000u + 0x100000u * (unsigned)n); }

static moejit_moe_args args_for(int64_t T, int64_t H, int64_t I, int64_t E, int64_t k)
{
    moejit_moe_args a;
    memset(&a, 0, sizeof a);
    a.num_tokens = T, a.hidden = H, a.inter = I, a.num_experts = E, a.topk = k;
    a.x = dev(1), a.w1 = dev(2), a.w2 = dev(3), a.out = (void *)dev(4), a.router_logits = dev(7);
    return a;
}

/* The forward of spec on a through the recording driver under decode mode `decode`. */
static void run_forward(const moejit_spec *s, const moejit_moe_args *a, int decode)
{
    mj_driver d;
    memset(&d, 0, sizeof d);
    d.cuLaunchKernel = fake_launch, d.cuLaunchKernelEx = fake_launch_ex, d.cuMemsetD32Async = fake_memset;
    d.cuCtxGetDevice = fake_ctx_device, d.cuKernelSetAttribute = fake_set_attr, d.cuDeviceGetAttribute = fake_sm_count;
    d.cuKernelGetFunction = fake_get_function, d.cuOccupancyMaxActiveClusters = fake_max_clusters;
    d.cuTensorMapEncodeTiled = fake_encode;
    mj_module m;
    memset(&m, 0, sizeof m);
    m.n_kernels = MJ_MAX_KERNELS;
    for (int i = 0; i < MJ_MAX_KERNELS; i++) m.kernels[i] = (CUkernel)(uintptr_t)(i + 1);
    n_recs = n_memsets = 0;
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_workspace_size(s, a, &bytes), MOEJIT_OK);
    const mj_launch_knobs knobs = {decode, MJ_PDL_ALL};
    moejit_status st = mj_launch_forward(&d, s, &m, a, (void *)(uintptr_t)0x70000000u, bytes, NULL, &knobs);
    ck_assert_msg(st == MOEJIT_OK, "forward: %s", moejit_last_error());
}

static int launched(int kernel)
{
    for (int i = 0; i < n_recs; i++)
        if (recs[i].kernel == kernel) return 1;
    return 0;
}

/* The forward enqueues what its plan names: the persistent layer's two kernels, or the chain's
 * routing, offsets, GEMMs and finalize, with the plan's K splits and row tiles. */
static void check_launch_follows_plan(const moejit_spec *s, const moejit_moe_args *a, int decode)
{
    mj_gemm_plan p;
    mj_gemm_plan_make(s, a, SMS, decode, &p);
    run_forward(s, a, decode);
    const long long T = a->num_tokens;
    if (p.persistent_splits) {
        ck_assert_int_eq(n_recs, 2);
        ck_assert_int_eq(recs[0].kernel, MJ_MMA_K_DECODE_RESET);
        ck_assert_int_eq(recs[1].kernel, p.persistent_shallow ? MJ_MMA_K_DECODE_PERSISTENT_SHALLOW
                                                              : MJ_MMA_K_DECODE_PERSISTENT);
        /* 4-bit: four blocks where an SM has 228 KiB, but with zero points or fp16 mxfp4 three */
        const int wide = (s->arch == MJ_ARCH_SM90A || s->arch == MJ_ARCH_SM100A) && !s->zero_point &&
                         !(s->quant == MJ_QUANT_MXFP4 && s->dtype == MJ_DTYPE_FP16);
        const int per_sm = mj_quant_is_4bit(s->quant) ? (wide ? 4 : 3)
                           : p.persistent_shallow     ? MJ_MMA_DECODE_SHALLOW_BLOCKS_PER_SM
                                                      : MJ_MMA_DECODE_BLOCKS_PER_SM;
        ck_assert_int_eq(p.persistent_blocks_per_sm, per_sm);
        ck_assert_uint_eq(recs[1].gx, SMS * per_sm);
        ck_assert_int_eq(recs[1].splits, p.persistent_splits);
        return;
    }
    ck_assert_msg(launched(p.k_gemm1) && launched(p.k_gemm2), "T=%lld: GEMMs %d, %d not launched", T, p.k_gemm1,
                  p.k_gemm2);
    ck_assert_int_eq(launched(p.k_offsets), !p.routed_gemm1 && !p.fused_route);
    ck_assert_int_eq(launched(MJ_MMA_K_ROUTE_FUSED_SMALL), p.fused_route);
    ck_assert_int_eq(launched(MJ_MMA_K_ROUTE), !p.routed_gemm1 && !p.fused_route);
    ck_assert_int_eq(launched(MJ_MMA_K_FINALIZE), !p.t1_fused);
    ck_assert_int_eq(recs[n_recs - 1].splits, p.gemm2_splits);
    ck_assert_int_eq(recs[n_recs - 1].max_tiles, p.max_tiles);
}

/* bench layer's label of a plan: path, then /pN[s] (persistent), /N (split), /t1 or /64. */
static void label_of(const mj_gemm_plan *p, char *buf, size_t n)
{
    const char *name = mj_mma_path_name(p->path);
    if (p->persistent_splits > 1) snprintf(buf, n, "%s/p%d%s", name, p->persistent_splits, p->persistent_shallow ? "s" : "");
    else if (p->persistent_splits) snprintf(buf, n, "%s/p%s", name, p->persistent_shallow ? "s" : "");
    else if (p->chain_splits > 1) snprintf(buf, n, "%s/%d", name, p->chain_splits);
    else if (p->t1_fused) snprintf(buf, n, "%s/t1", name);
    else if (p->short_tiles) snprintf(buf, n, "%s/64", name);
    else snprintf(buf, n, "%s", name);
}

typedef struct point {
    int64_t T;
    const char *label;
} point;

/* Each point's label under the auto decode mode on SMS SMs, and the launch that follows it. */
static void check_points(const char *text, int64_t H, int64_t I, int64_t E, int64_t k, const point *pts, size_t n)
{
    moejit_spec *s = spec_of(text);
    for (size_t i = 0; i < n; i++) {
        moejit_moe_args a = args_for(pts[i].T, H, I, E, k);
        mj_gemm_plan p;
        mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_AUTO, &p);
        char label[32];
        label_of(&p, label, sizeof label);
        ck_assert_msg(strcmp(label, pts[i].label) == 0, "%s T=%lld: %s, want %s", text, (long long)pts[i].T, label,
                      pts[i].label);
        check_launch_follows_plan(s, &a, MJ_DECODE_AUTO);
    }
    moejit_spec_destroy(s);
}

START_TEST(qwen3_30b_paths_per_batch_on_both_backends)
{
    /* H 2048, I 768, E 128, k 8: 24 GEMM1 tiles per expert; rows per expert = T / 16 */
    static const point mma[] = {{1, "small/t1"}, {2, "small/p"},  {3, "small/p"},    {4, "small/ps"},
                                {8, "small/ps"}, {9, "small"},    {16, "small"},     {64, "small"},
                                {384, "small"},  {385, "large"},  {4096, "large"},   {16384, "large"}};
    static const point wgmma[] = {{1, "small/t1"},  {2, "small/p"},    {4, "small/ps"},   {8, "small/ps"},
                                  {16, "small"},    {128, "small"},    {129, "large/64"}, {512, "large/64"},
                                  {513, "large"},   {2047, "large"},   {2048, "pair"},    {16384, "pair"}};
    check_points(MMA, 2048, 768, 128, 8, mma, sizeof mma / sizeof mma[0]);
    check_points(WGMMA, 2048, 768, 128, 8, wgmma, sizeof wgmma / sizeof wgmma[0]);
}
END_TEST

START_TEST(mixtral_paths_per_batch_on_both_backends)
{
    /* H 4096, I 14336, E 8, k 2: 448 GEMM1 tiles per expert, more than the shallow blocks */
    static const point mma[] = {{1, "small/p8"}, {4, "small/p8"}, {8, "small/p8"}, {9, "small"},
                                {16, "small"},   {96, "small"},   {97, "large"},   {16384, "large"}};
    static const point wgmma[] = {{1, "small/p8"},  {8, "small/p8"},   {32, "small"},     {33, "large/64"},
                                  {128, "large/64"}, {129, "large"},   {511, "large"},    {512, "pair"},
                                  {16384, "pair"}};
    check_points(MMA, 4096, 14336, 8, 2, mma, sizeof mma / sizeof mma[0]);
    check_points(WGMMA, 4096, 14336, 8, 2, wgmma, sizeof wgmma / sizeof wgmma[0]);
    /* the chain at 4 tokens splits its GEMM2 in two (about 350 live CTAs expected) */
    moejit_spec *s = spec_of(MMA);
    moejit_moe_args a = args_for(4, 4096, 14336, 8, 2);
    mj_gemm_plan p;
    mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_CHAIN, &p);
    char label[32];
    label_of(&p, label, sizeof label);
    ck_assert_str_eq(label, "small/2");
    ck_assert_int_eq(p.workspace_splits, 8);
    check_launch_follows_plan(s, &a, MJ_DECODE_CHAIN);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(decode_modes_choose_the_persistent_layer_and_its_blocks)
{
    static const int modes[] = {MJ_DECODE_AUTO, MJ_DECODE_PERSISTENT, MJ_DECODE_CHAIN, MJ_DECODE_PERSISTENT_DEEP,
                                MJ_DECODE_PERSISTENT_SHALLOW};
    const char *const texts[] = {MMA, WGMMA};
    for (int b = 0; b < 2; b++) {
        moejit_spec *s = spec_of(texts[b]);
        for (int64_t T = 1; T <= MJ_MMA_PERSISTENT_MAX_TOKENS; T++) {
            moejit_moe_args a = args_for(T, 2048, 768, 128, 8);
            for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
                mj_gemm_plan p;
                mj_gemm_plan_make(s, &a, SMS, modes[i], &p);
                ck_assert(p.persistent_candidate);
                if (modes[i] == MJ_DECODE_CHAIN) ck_assert_int_eq(p.persistent_splits, 0);
                if (modes[i] >= MJ_DECODE_PERSISTENT && modes[i] != MJ_DECODE_CHAIN) ck_assert_int_eq(p.persistent_splits, 1);
                if (modes[i] == MJ_DECODE_PERSISTENT_DEEP) ck_assert(!p.persistent_shallow);
                if (modes[i] == MJ_DECODE_PERSISTENT_SHALLOW) ck_assert(p.persistent_shallow);
                check_launch_follows_plan(s, &a, modes[i]);
            }
        }
        /* without the device's SM count the decode layer is left to the chain */
        moejit_moe_args a = args_for(4, 2048, 768, 128, 8);
        mj_gemm_plan p;
        mj_gemm_plan_make(s, &a, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &p);
        ck_assert_int_eq(p.persistent_splits, 0);
        mj_gemm_plan_decode_layer(s, &a, SMS, MJ_DECODE_AUTO, &p);
        ck_assert_int_eq(p.persistent_splits, 1);
        ck_assert(p.persistent_shallow);
        moejit_spec_destroy(s);
    }
    /* precomputed routing never takes it; an sm_86 device never the shallow blocks */
    moejit_spec *s = spec_of("backend=mma,quant=bf16,act=swiglu,routing=precomputed,arch=sm_90a");
    moejit_moe_args a = args_for(4, 2048, 768, 128, 8);
    mj_gemm_plan p;
    mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_PERSISTENT, &p);
    ck_assert(!p.persistent_candidate && p.persistent_splits == 0);
    moejit_spec_destroy(s);
    s = spec_of("backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_86");
    mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_AUTO, &p);
    ck_assert(p.persistent_splits == 1 && !p.persistent_shallow);
    moejit_spec_destroy(s);
}
END_TEST

/* 4-bit layers take the chain at every batch unless the decode mode names the persistent layer
 * (its blocks then four per SM on sm_90a, three with zero points). */
START_TEST(four_bit_layers_take_the_chain_unless_told)
{
    static const struct { const char *spec; int64_t H, I, k; int per_sm; } cases[] = {
        {"backend=wgmma,quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),routing=renormalize,"
         "w1_layout=interleaved,bias=both,arch=sm_90a", 2880, 2880, 4, 4},
        {"backend=mma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 8, 4},
        {"backend=wgmma,quant=w4a16,group=64,zero_point=1,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 8,
         3},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        moejit_spec *s = spec_of(cases[c].spec);
        for (int64_t T = 1; T <= MJ_MMA_PERSISTENT_MAX_TOKENS; T++) {
            moejit_moe_args a = args_for(T, cases[c].H, cases[c].I, 128, cases[c].k);
            a.w1_scale = dev(8), a.w2_scale = dev(9);
            if (s->zero_point) a.w1_zero = dev(10), a.w2_zero = dev(11);
            if (s->bias == MJ_BIAS_BOTH) a.b1 = dev(12), a.b2 = dev(13);
            mj_gemm_plan p;
            mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_AUTO, &p);
            ck_assert(p.persistent_candidate);
            ck_assert_msg(p.persistent_splits == 0, "%s T=%lld: the persistent layer unasked", cases[c].spec,
                          (long long)T);
            check_launch_follows_plan(s, &a, MJ_DECODE_AUTO);
            mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_PERSISTENT, &p);
            ck_assert_int_gt(p.persistent_splits, 0);
            ck_assert(!p.persistent_shallow);
            ck_assert_int_eq(p.persistent_blocks_per_sm, cases[c].per_sm);
            check_launch_follows_plan(s, &a, MJ_DECODE_PERSISTENT);
        }
        moejit_spec_destroy(s);
    }
}
END_TEST

/* 4-bit layers keep the small path up to 48 rows per expert on mma and up to 28 on wgmma,
 * where each large path overtakes it, and on wgmma take the tall tiles from 256
 * (runtime/gemm_plan.h); 16-bit wgmma leaves the small path after 8 and mma after 24. */
START_TEST(four_bit_layers_keep_the_small_path_to_48_rows_per_expert_on_mma_and_28_on_wgmma)
{
    static const struct { const char *spec; int64_t H, I, k, T; int path; } want[] = {
        {"backend=wgmma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 8, 448,
         MJ_MMA_PATH_SMALL},
        {"backend=wgmma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 8, 449,
         MJ_MMA_PATH_LARGE},
        {"backend=wgmma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 896, MJ_MMA_PATH_SMALL},
        {"backend=wgmma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 897, MJ_MMA_PATH_LARGE},
        {"backend=wgmma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 8191, MJ_MMA_PATH_LARGE},
        {"backend=wgmma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 8192, MJ_MMA_PATH_TALL},
        {"backend=mma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 8192, MJ_MMA_PATH_LARGE},
        {"backend=mma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 8, 768,
         MJ_MMA_PATH_SMALL},
        {"backend=mma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 8, 769,
         MJ_MMA_PATH_LARGE},
        {"backend=mma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 1536, MJ_MMA_PATH_SMALL},
        {"backend=mma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a", 2880, 2880, 4, 1537, MJ_MMA_PATH_LARGE},
        {WGMMA, 2048, 768, 8, 128, MJ_MMA_PATH_SMALL},
        {WGMMA, 2048, 768, 8, 129, MJ_MMA_PATH_LARGE},
        {MMA, 2048, 768, 8, 384, MJ_MMA_PATH_SMALL},
        {MMA, 2048, 768, 8, 385, MJ_MMA_PATH_LARGE},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        moejit_spec *s = spec_of(want[i].spec);
        moejit_moe_args a = args_for(want[i].T, want[i].H, want[i].I, 128, want[i].k);
        mj_gemm_plan p;
        mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_AUTO, &p);
        ck_assert_msg(p.rule_path == want[i].path, "%s T=%lld: rule path %d, want %d", want[i].spec,
                      (long long)want[i].T, p.rule_path, want[i].path);
        moejit_spec_destroy(s);
    }
}
END_TEST

START_TEST(a_tuning_table_entry_overrides_the_rule_and_the_launch_follows)
{
    static const char table[] =
        "{\"version\":1,\"entries\":[{\"backend\":\"wgmma\",\"arch\":\"sm_90a\",\"hidden\":2048,"
        "\"inter\":768,\"experts\":128,\"topk\":8,\"gated\":true,\"dtype\":\"bf16\",\"max_tokens\":64,"
        "\"path\":\"large\"},{\"backend\":\"wgmma\",\"arch\":\"sm_90a\",\"hidden\":2048,\"inter\":768,"
        "\"experts\":128,\"topk\":8,\"gated\":true,\"dtype\":\"bf16\",\"max_tokens\":4096,"
        "\"path\":\"tall\"}]}";
    moejit_spec *s = spec_of(WGMMA);
    ck_assert_int_eq(mj_tune_table_install(table), MOEJIT_OK);
    static const struct { int64_t T; int path, rule; } want[] = {
        {1, MJ_MMA_PATH_LARGE, MJ_MMA_PATH_SMALL}, {64, MJ_MMA_PATH_LARGE, MJ_MMA_PATH_SMALL},
        {65, MJ_MMA_PATH_TALL, MJ_MMA_PATH_SMALL}, {4096, MJ_MMA_PATH_TALL, MJ_MMA_PATH_PAIR},
        {4097, MJ_MMA_PATH_PAIR, MJ_MMA_PATH_PAIR}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        moejit_moe_args a = args_for(want[i].T, 2048, 768, 128, 8);
        mj_gemm_plan p;
        mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_AUTO, &p);
        ck_assert_int_eq(p.path, want[i].path);
        ck_assert_int_eq(p.rule_path, want[i].rule);
        ck_assert_int_eq(p.persistent_splits, 0); /* the large path has no decode layer */
        check_launch_follows_plan(s, &a, MJ_DECODE_AUTO);
    }
    /* the entries were measured on 16-bit weights: a 4-bit or fp8 layer of the same shape and
     * dtype keeps its own rule (runtime/tune_table.h) */
    static const char *const others[] = {
        "backend=wgmma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a",
        "backend=wgmma,quant=mxfp4,act=swiglu,routing=renormalize,arch=sm_90a",
        "backend=wgmma,quant=fp8_block,act=swiglu,routing=renormalize,arch=sm_90a"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        moejit_spec *o = spec_of(others[i]);
        for (int64_t T = 1; T <= 4096; T *= 64) {
            moejit_moe_args a = args_for(T, 2048, 768, 128, 8);
            mj_gemm_plan p;
            mj_gemm_plan_make(o, &a, SMS, MJ_DECODE_AUTO, &p);
            ck_assert_msg(p.path == p.rule_path, "%s T=%lld: path %d, its rule %d", others[i], (long long)T, p.path,
                          p.rule_path);
        }
        moejit_spec_destroy(o);
    }
    ck_assert_int_eq(mj_tune_table_install(NULL), MOEJIT_OK);
    moejit_moe_args a = args_for(1, 2048, 768, 128, 8);
    mj_gemm_plan p;
    mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_AUTO, &p);
    ck_assert_int_eq(p.path, MJ_MMA_PATH_SMALL);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(an_empty_batch_plans_nothing)
{
    moejit_spec *s = spec_of(WGMMA);
    moejit_moe_args a = args_for(0, 2048, 768, 128, 8);
    mj_gemm_plan p;
    mj_gemm_plan_make(s, &a, SMS, MJ_DECODE_PERSISTENT, &p);
    ck_assert_int_eq(p.path, MJ_MMA_PATH_AUTO);
    ck_assert(!p.persistent_candidate && p.persistent_splits == 0);
    ck_assert_int_eq(p.workspace_splits, 1);
    moejit_spec_destroy(s);
}
END_TEST

static Suite *gemm_plan_suite(void)
{
    Suite *s = suite_create("gemm_plan");
    TCase *tc = tcase_create("gemm_plan");
    tcase_add_test(tc, qwen3_30b_paths_per_batch_on_both_backends);
    tcase_add_test(tc, mixtral_paths_per_batch_on_both_backends);
    tcase_add_test(tc, decode_modes_choose_the_persistent_layer_and_its_blocks);
    tcase_add_test(tc, four_bit_layers_take_the_chain_unless_told);
    tcase_add_test(tc, four_bit_layers_keep_the_small_path_to_48_rows_per_expert_on_mma_and_28_on_wgmma);
    tcase_add_test(tc, a_tuning_table_entry_overrides_the_rule_and_the_launch_follows);
    tcase_add_test(tc, an_empty_batch_plans_nothing);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(gemm_plan_suite)
