/*
 * This file contains the tests of runtime/launch.c without a GPU: the shape rules of every
 * format (fp8_block multiples of 128, w4a16 multiples of the group, mxfp4 multiples of 32),
 * the tensors each spec requires and refuses (scales, zero points, biases, the selection
 * bias, the static fp8 input scale, per-expert activation overrides) with their alignment,
 * the routing methods' own rules (deepseek_v3's n_group must divide E, llama4 is top-1), the
 * workspace size of each format, and — through a driver table whose launch and memset only
 * record their arguments — which kernels a forward enqueues, in which order, with which
 * grids, and the parameter block they receive.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "templates/common/mma_params.h"
#include "templates/common/mma_w4_params.h"
#include "templates/common/params.h"
#include "templates/common/wgmma_params.h"
#include "runtime/driver.h"
#include "runtime/launch.h"
#include "runtime/gemm_plan.h"
#include "runtime/launch_backends.h"
#include "runtime/launch_common.h"
#include "runtime/launch_tc_fp8.h"
#include "lib/check_main.h"
#include "runtime/loader.h"
#include "moejit.h"
#include "core/spec.h"
#include "runtime/tune_table.h"

/* The GEMM path the launch plan (runtime/gemm_plan.h) gives a forward of spec on args. */
static int plan_path(const moejit_spec *spec, const moejit_moe_args *args)
{
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, args, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO, &plan);
    return plan.path;
}

/* The launch plan (runtime/gemm_plan.h) of a forward of spec on args, on sms SMs under decode mode decode. */
static mj_gemm_plan plan_of(const moejit_spec *spec, const moejit_moe_args *args, int sms, int decode)
{
    mj_gemm_plan plan;
    mj_gemm_plan_make(spec, args, sms, decode, &plan);
    return plan;
}

/* ---- a recording driver -------------------------------------------------------------------- */

typedef struct launch_rec {
    int kernel; /* index in the kernel table */
    unsigned gx, gy, block;
    mj_layer_params p;
} launch_rec;

/* The launch settings every forward of these tests runs with (a test may change them). */
static mj_launch_knobs g_knobs = {MJ_DECODE_AUTO, MJ_PDL_ALL};

static launch_rec recs[32];
static int n_recs;
static size_t memset_count;
static CUdeviceptr memset_ptr;

static CUresult fake_memset(CUdeviceptr ptr, unsigned int v, size_t n, CUstream s)
{
    (void)v, (void)s;
    memset_ptr = ptr;
    memset_count = n;
    return CUDA_SUCCESS;
}

static CUresult fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                            unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    (void)gz, (void)by, (void)bz, (void)smem, (void)s, (void)extra;
    ck_assert_int_lt(n_recs, 32);
    launch_rec *r = &recs[n_recs++];
    r->kernel = (int)((uintptr_t)f - 1);
    r->gx = gx, r->gy = gy, r->block = bx;
    memcpy(&r->p, params[0], sizeof r->p);
    return CUDA_SUCCESS;
}

static mj_driver fake_driver(void)
{
    mj_driver d;
    memset(&d, 0, sizeof d);
    d.cuMemsetD32Async = fake_memset;
    d.cuLaunchKernel = fake_launch;
    return d;
}

static mj_module fake_module(void)
{
    mj_module m;
    memset(&m, 0, sizeof m);
    m.n_kernels = MJ_SIMT_NUM_KERNELS;
    for (int i = 0; i < MJ_SIMT_NUM_KERNELS; i++) m.kernels[i] = (CUkernel)(uintptr_t)(i + 1);
    return m;
}

/* ---- specs and args -------------------------------------------------------------------------- */

static moejit_spec *spec_of(const char *text)
{
    moejit_spec *s = NULL;
    moejit_status st = moejit_spec_parse(text, &s);
    ck_assert_msg(st == MOEJIT_OK, "parse '%s': %s", text, moejit_last_error());
    return s;
}

/* A fake device address: never dereferenced, 256-byte aligned unless offset. */
static const void *dev(int n) { return (const void *)(uintptr_t)(0x10000000u + 0x100000u * (unsigned)n); }

/* Args with every tensor the spec needs, at aligned fake addresses. */
static moejit_moe_args args_for(const moejit_spec *s, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k)
{
    moejit_moe_args a;
    memset(&a, 0, sizeof a);
    a.num_tokens = T, a.hidden = H, a.inter = I, a.num_experts = E, a.topk = k;
    a.x = dev(1), a.w1 = dev(2), a.w2 = dev(3), a.out = (void *)dev(4);
    if (s->routing == MJ_ROUTING_PRECOMPUTED)
        a.topk_ids = dev(5), a.topk_weights = dev(6);
    else
        a.router_logits = dev(7);
    if (s->quant != MJ_QUANT_BF16 && s->quant != MJ_QUANT_FP16) a.w1_scale = dev(8), a.w2_scale = dev(9);
    if (s->quant == MJ_QUANT_W4A16 && s->zero_point) a.w1_zero = dev(10), a.w2_zero = dev(11);
    if (s->bias == MJ_BIAS_B1 || s->bias == MJ_BIAS_BOTH) a.b1 = dev(12);
    if (s->bias == MJ_BIAS_B2 || s->bias == MJ_BIAS_BOTH) a.b2 = dev(13);
    if (s->quant == MJ_QUANT_FP8_TENSOR && s->fp8_act == MJ_FP8_ACT_STATIC) a.x_scale = dev(14);
    return a;
}

/* A forward through the recording driver; returns its status, recs/n_recs hold the launches. */
static moejit_status forward(const moejit_spec *s, const moejit_moe_args *a)
{
    mj_driver d = fake_driver();
    mj_module m = fake_module();
    size_t bytes = 0;
    n_recs = 0;
    memset_count = 0;
    moejit_status st = mj_launch_workspace_size(s, a, &bytes);
    if (st != MOEJIT_OK) return st;
    return mj_launch_forward(&d, s, &m, a, (void *)(uintptr_t)0x70000000u, bytes, NULL, &g_knobs);
}

static void expect_error(moejit_status st, const char *what, const char *part)
{
    ck_assert_msg(st == MOEJIT_ERR_INVALID_ARGUMENT, "%s: got %s (%s)", what, moejit_status_name(st),
                  moejit_last_error());
    ck_assert_msg(strstr(moejit_last_error(), part), "%s: message '%s' lacks '%s'", what, moejit_last_error(),
                  part);
}

/* The forward of spec text with args edited by `edit` fails naming `part`. */
static void forward_fails(const char *text, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k,
                          void (*edit)(moejit_moe_args *), const char *part)
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, T, H, I, E, k);
    if (edit) edit(&a);
    expect_error(forward(s, &a), text, part);
    ck_assert_int_eq(n_recs, 0); /* nothing was enqueued */
    moejit_spec_destroy(s);
}

static void forward_ok(const char *text, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k,
                       void (*edit)(moejit_moe_args *))
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, T, H, I, E, k);
    if (edit) edit(&a);
    moejit_status st = forward(s, &a);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    moejit_spec_destroy(s);
}

/* ---- shapes ------------------------------------------------------------------------------------ */

START_TEST(fp8_block_needs_hidden_and_inter_multiples_of_128)
{
    const char *spec = "backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu";
    forward_fails(spec, 4, 96, 128, 8, 2, NULL,
                  "args.hidden: must be a multiple of 128 (quant=fp8_block scales 128x128 weight blocks and "
                  "1x128 activation groups), got 96");
    forward_fails(spec, 4, 256, 200, 8, 2, NULL, "args.inter: must be a multiple of 128");
    forward_ok(spec, 4, 256, 128, 8, 2, NULL);
    /* the shape check alone (workspace size) says the same */
    moejit_spec *s = spec_of(spec);
    moejit_moe_args a = args_for(s, 4, 136, 128, 8, 2);
    size_t bytes = 1;
    expect_error(mj_launch_workspace_size(s, &a, &bytes), "workspace", "args.hidden: must be a multiple of 128");
    ck_assert_uint_eq(bytes, 0);
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(w4a16_needs_multiples_of_its_group_and_whole_zero_point_bytes)
{
    forward_fails("backend=simt,arch=sm_90a,quant=w4a16,group=64,act=silu", 3, 96, 64, 4, 1, NULL,
                  "args.hidden: must be a multiple of 64 (quant=w4a16 has one scale per 64 along K), got 96");
    forward_fails("backend=simt,arch=sm_90a,quant=w4a16,group=128,act=silu", 3, 128, 64, 4, 1, NULL,
                  "args.inter: must be a multiple of 128");
    /* with zero points each row's zero nibbles must fill whole bytes: 2 groups */
    forward_fails("backend=simt,arch=sm_90a,quant=w4a16,group=32,zero_point=1,act=silu", 3, 96, 64, 4, 1, NULL,
                  "args.hidden: must be a multiple of 64 (quant=w4a16 has one scale per 32 along K, and two "
                  "4-bit zero points per byte), got 96");
    forward_ok("backend=simt,arch=sm_90a,quant=w4a16,group=32,act=silu", 3, 96, 32, 4, 1, NULL);
    forward_ok("backend=simt,arch=sm_90a,quant=w4a16,group=32,zero_point=1,act=silu", 3, 128, 64, 4, 1, NULL);
}
END_TEST

START_TEST(mxfp4_needs_multiples_of_32)
{
    forward_fails("backend=simt,arch=sm_90a,quant=mxfp4,act=swiglu", 2, 64, 48, 4, 2, NULL,
                  "args.inter: must be a multiple of 32 (quant=mxfp4 has one e8m0 scale per 32 along K), got 48");
    forward_ok("backend=simt,arch=sm_90a,quant=mxfp4,act=swiglu", 2, 2880, 32, 4, 2, NULL);
}
END_TEST

/* ---- scales, zero points, biases -------------------------------------------------------------- */

static void drop_w1_scale(moejit_moe_args *a) { a->w1_scale = NULL; }
static void drop_w2_scale(moejit_moe_args *a) { a->w2_scale = NULL; }
static void drop_w2_zero(moejit_moe_args *a) { a->w2_zero = NULL; }
static void add_w1_scale(moejit_moe_args *a) { a->w1_scale = dev(20); }
static void add_w1_zero(moejit_moe_args *a) { a->w1_zero = dev(20); }
static void odd_w1_scale(moejit_moe_args *a) { a->w1_scale = (const char *)dev(20) + 2; }
static void odd_w2_scale_by_one(moejit_moe_args *a) { a->w2_scale = (const char *)dev(20) + 1; }
static void odd_w1(moejit_moe_args *a) { a->w1 = (const char *)dev(20) + 8; }

START_TEST(missing_or_foreign_scales_are_refused_naming_the_field)
{
    forward_fails("backend=simt,arch=sm_90a,quant=fp8_tensor,act=swiglu", 2, 64, 32, 4, 2, drop_w1_scale,
                  "args.w1_scale: must not be NULL (quant=fp8_tensor: fp32 [E_local] per matrix)");
    forward_fails("backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu", 2, 128, 128, 4, 2, drop_w2_scale,
                  "args.w2_scale: must not be NULL (quant=fp8_block: fp32 [E_local, N/128, K/128])");
    forward_fails("backend=simt,arch=sm_90a,quant=mxfp4,act=swiglu", 2, 64, 32, 4, 2, drop_w1_scale,
                  "args.w1_scale: must not be NULL (quant=mxfp4: e8m0 bytes [E_local, N, K/32])");
    forward_fails("backend=simt,arch=sm_90a,quant=w4a16,zero_point=1,act=swiglu", 2, 256, 256, 4, 2,
                  drop_w2_zero, "args.w2_zero: must not be NULL (quant=w4a16 with zero_point=1");
    forward_fails("backend=simt,arch=sm_90a,quant=bf16,act=swiglu", 2, 64, 32, 4, 2, add_w1_scale,
                  "args.w1_scale: must be NULL: bf16/fp16 weights have no scales");
    forward_fails("backend=simt,arch=sm_90a,quant=w4a16,zero_point=0,act=swiglu", 2, 128, 128, 4, 2,
                  add_w1_zero, "args.w1_zero: must be NULL: the spec has zero_point=0 (every zero point is 8)");
}
END_TEST

START_TEST(misaligned_tensors_are_refused)
{
    forward_fails("backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu", 2, 128, 128, 4, 2, odd_w1_scale,
                  "args.w1_scale: must be 4-byte aligned");
    /* bf16 int4 scales need 2 bytes; e8m0 bytes need nothing */
    forward_fails("backend=simt,arch=sm_90a,quant=w4a16,act=swiglu", 2, 128, 128, 4, 2, odd_w2_scale_by_one,
                  "args.w2_scale: must be 2-byte aligned");
    forward_ok("backend=simt,arch=sm_90a,quant=mxfp4,act=swiglu", 2, 64, 32, 4, 2, odd_w2_scale_by_one);
    forward_fails("backend=simt,arch=sm_90a,quant=fp8_tensor,act=swiglu", 2, 64, 32, 4, 2, odd_w1,
                  "args.w1: must be 16-byte aligned");
}
END_TEST

static void drop_b1(moejit_moe_args *a) { a->b1 = NULL; }
static void add_b2(moejit_moe_args *a) { a->b2 = dev(21); }
static void odd_b2(moejit_moe_args *a) { a->b2 = (const char *)dev(21) + 1; }

START_TEST(biases_are_required_exactly_when_the_spec_has_them)
{
    forward_fails("backend=simt,arch=sm_90a,act=swiglu,bias=b1", 2, 64, 32, 4, 2, drop_b1,
                  "args.b1: must not be NULL (the spec has bias b1 or both: dtype [E_local, rows])");
    forward_fails("backend=simt,arch=sm_90a,act=swiglu,bias=b1", 2, 64, 32, 4, 2, add_b2,
                  "args.b2: must be NULL: the spec has no bias b2");
    forward_fails("backend=simt,arch=sm_90a,act=swiglu,bias=both", 2, 64, 32, 4, 2, odd_b2,
                  "args.b2: must be 2-byte aligned");
    forward_ok("backend=simt,arch=sm_90a,act=swiglu,bias=both,quant=mxfp4,w1_layout=interleaved", 2, 64, 32, 4,
               2, NULL);
}
END_TEST

static void drop_x_scale(moejit_moe_args *a) { a->x_scale = NULL; }
static void add_x_scale(moejit_moe_args *a) { a->x_scale = (const float *)dev(22); }

START_TEST(static_fp8_input_needs_its_scale_and_only_it_takes_one)
{
    forward_fails("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=static,act=swiglu", 2, 64, 32, 4, 2,
                  drop_x_scale, "args.x_scale: must not be NULL (quant=fp8_tensor with fp8_act=static");
    forward_fails("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=tensor,act=swiglu", 2, 64, 32, 4, 2,
                  add_x_scale,
                  "args.x_scale: must be NULL: only quant=fp8_tensor with fp8_act=static takes a static x scale");
    forward_fails("backend=simt,arch=sm_90a,quant=bf16,act=swiglu", 2, 64, 32, 4, 2, add_x_scale,
                  "args.x_scale: must be NULL");
}
END_TEST

/* ---- routing ------------------------------------------------------------------------------------ */

static void add_routing_bias(moejit_moe_args *a) { a->routing_bias = (const float *)dev(23); }

START_TEST(routing_rules_are_checked_at_launch)
{
    const char *dsv3 = "backend=simt,arch=sm_90a,act=swiglu,routing=deepseek_v3,n_group=8,topk_group=2";
    forward_fails(dsv3, 4, 64, 32, 12, 2, NULL,
                  "args.num_experts: routing=deepseek_v3 needs num_experts divisible by n_group (8), got 12");
    forward_fails(dsv3, 4, 64, 32, 4, 2, NULL, "args.num_experts: routing=deepseek_v3 needs num_experts divisible");
    /* 16 experts in 8 groups of 2, 2 groups kept: at most 4 eligible */
    forward_fails(dsv3, 4, 64, 32, 16, 5, NULL,
                  "args.topk: routing=deepseek_v3 chooses among topk_group x num_experts/n_group = 2 x 2 = 4 "
                  "experts, got 5");
    forward_ok(dsv3, 4, 64, 32, 16, 4, add_routing_bias);
    forward_ok(dsv3, 4, 64, 32, 16, 4, NULL); /* the selection bias is optional */
    forward_fails("backend=simt,arch=sm_90a,act=swiglu,routing=llama4", 4, 64, 32, 16, 2, NULL,
                  "args.topk: routing=llama4 is top-1, must be 1, got 2");
    forward_ok("backend=simt,arch=sm_90a,act=swiglu,routing=llama4,logits=bf16", 4, 64, 32, 16, 1, NULL);
    forward_fails("backend=simt,arch=sm_90a,act=swiglu,routing=sigmoid_renorm", 4, 64, 32, 16, 2,
                  add_routing_bias, "args.routing_bias: must be NULL: only deepseek_v3 routing has a selection bias");
}
END_TEST

/* ---- per-expert activation parameters ---------------------------------------------------------- */

static void override_0(moejit_moe_args *a) { a->act_param[0] = (const float *)dev(24); }
static void override_1(moejit_moe_args *a) { a->act_param[1] = (const float *)dev(24); }
static void override_all(moejit_moe_args *a)
{
    for (int i = 0; i < 3; i++) a->act_param[i] = (const float *)dev(24 + i);
}
static void override_odd(moejit_moe_args *a) { a->act_param[2] = (const float *)((const char *)dev(24) + 2); }

START_TEST(activation_overrides_follow_the_activations_parameters)
{
    forward_fails("backend=simt,arch=sm_90a,act=relu2", 2, 64, 32, 4, 2, override_0,
                  "args.act_param[0]: must be NULL: activation relu2 has no parameters to override");
    forward_fails("backend=simt,arch=sm_90a,act=geglu,quant=fp8_tensor", 2, 64, 32, 4, 2, override_1,
                  "args.act_param[1]: must be NULL: activation geglu has no parameters to override");
    forward_fails("backend=simt,arch=sm_90a,act=swiglu_step", 2, 64, 32, 4, 2, override_1,
                  "args.act_param[1]: must be NULL: activation swiglu_step has 1 parameter; allowed indices: "
                  "0 (limit)");
    forward_fails("backend=simt,arch=sm_90a,act=swiglu", 2, 64, 32, 4, 2, override_odd,
                  "args.act_param[2]: must be 4-byte aligned (fp32 [E_local] values of limit)");
    forward_ok("backend=simt,arch=sm_90a,act=swiglu_step", 2, 64, 32, 4, 2, override_0);
    forward_ok("backend=simt,arch=sm_90a,act=situ(gate_scale=4,linear_scale=none)", 2, 64, 32, 4, 2,
               override_all);
    ck_assert_uint_eq(recs[0].p.act_param[1], (uintptr_t)dev(25)); /* handed to the kernels */
}
END_TEST

/* ---- workspace and launch sequence ------------------------------------------------------------- */

static size_t ws_of(const char *text, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k)
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, T, H, I, E, k);
    size_t bytes = 0;
    moejit_status st = mj_launch_workspace_size(s, &a, &bytes);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    moejit_spec_destroy(s);
    return bytes;
}

START_TEST(fp8_workspace_holds_the_quantized_activations_and_their_scales)
{
    const int64_t T = 64, H = 1024, I = 512, E = 16, k = 4, P = T * k;
    const size_t bf16 = ws_of("backend=simt,arch=sm_90a,act=swiglu", T, H, I, E, k);
    const size_t tensor = ws_of("backend=simt,arch=sm_90a,quant=fp8_tensor,act=swiglu", T, H, I, E, k);
    const size_t token = ws_of("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=token,act=swiglu", T, H, I, E, k);
    const size_t stat = ws_of("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=static,act=swiglu", T, H, I, E, k);
    const size_t block = ws_of("backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu", T, H, I, E, k);
    const size_t w4 = ws_of("backend=simt,arch=sm_90a,quant=w4a16,act=swiglu", T, H, I, E, k);
    ck_assert_uint_eq(w4, bf16); /* weight-only formats need nothing more */
    /* xq [T, H] + interq [P, I] bytes, each region rounded to 256 */
    ck_assert_uint_ge(tensor, bf16 + (size_t)(T * H + P * I));
    ck_assert_uint_le(tensor, bf16 + (size_t)(T * H + P * I) + 4 * 256);
    ck_assert_uint_eq(stat + (size_t)(T * H) + 256, tensor); /* no xq, one-float xscale */
    ck_assert_uint_ge(token, tensor + 4 * (size_t)(T + P) - 2 * 256);
    ck_assert_uint_ge(block, tensor + 4 * (size_t)(T * H / 128 + P * I / 128) - 2 * 256);
    ck_assert_uint_eq(ws_of("backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu", 0, H, I, E, k), 0);
}
END_TEST

/* The kernels a forward of `text` launched, in order, as table indices. */
static int launched(const char *text, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k, int *out)
{
    forward_ok(text, T, H, I, E, k, NULL);
    for (int i = 0; i < n_recs; i++) out[i] = recs[i].kernel;
    return n_recs;
}

START_TEST(forward_launches_the_fp8_stages_only_where_activations_are_quantized)
{
    int seq[32], n;
    static const int plain[] = {MJ_SIMT_K_ROUTE, MJ_SIMT_K_EXPERT_OFFSETS, MJ_SIMT_K_SCATTER,
                                MJ_SIMT_K_GEMM1_ACT, MJ_SIMT_K_GEMM2, MJ_SIMT_K_FINALIZE};
    static const int tensor[] = {MJ_SIMT_K_ROUTE,      MJ_SIMT_K_EXPERT_OFFSETS, MJ_SIMT_K_SCATTER,
                                 MJ_SIMT_K_X_AMAX,     MJ_SIMT_K_X_QUANT,        MJ_SIMT_K_GEMM1_ACT,
                                 MJ_SIMT_K_INTER_AMAX, MJ_SIMT_K_INTER_QUANT,    MJ_SIMT_K_GEMM2,
                                 MJ_SIMT_K_FINALIZE};
    static const int token[] = {MJ_SIMT_K_ROUTE,     MJ_SIMT_K_EXPERT_OFFSETS, MJ_SIMT_K_SCATTER,
                                MJ_SIMT_K_X_QUANT,   MJ_SIMT_K_GEMM1_ACT,      MJ_SIMT_K_INTER_QUANT,
                                MJ_SIMT_K_GEMM2,     MJ_SIMT_K_FINALIZE};
    static const int stat[] = {MJ_SIMT_K_ROUTE,      MJ_SIMT_K_EXPERT_OFFSETS, MJ_SIMT_K_SCATTER,
                               MJ_SIMT_K_GEMM1_ACT,  MJ_SIMT_K_INTER_AMAX,     MJ_SIMT_K_INTER_QUANT,
                               MJ_SIMT_K_GEMM2,      MJ_SIMT_K_FINALIZE};
    n = launched("backend=simt,arch=sm_90a,act=swiglu", 5, 64, 32, 8, 2, seq);
    ck_assert_int_eq(n, 6);
    ck_assert_int_eq(memcmp(seq, plain, sizeof plain), 0);
    n = launched("backend=simt,arch=sm_90a,quant=mxfp4,act=swiglu", 5, 64, 32, 8, 2, seq);
    ck_assert_int_eq(n, 6);
    ck_assert_int_eq(memcmp(seq, plain, sizeof plain), 0);
    n = launched("backend=simt,arch=sm_90a,quant=fp8_tensor,act=swiglu", 5, 64, 32, 8, 2, seq);
    ck_assert_int_eq(n, 10);
    ck_assert_int_eq(memcmp(seq, tensor, sizeof tensor), 0);
    n = launched("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=token,act=swiglu", 5, 64, 32, 8, 2, seq);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(memcmp(seq, token, sizeof token), 0);
    n = launched("backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu", 5, 128, 128, 8, 2, seq);
    ck_assert_int_eq(n, 8); /* per 1x128 group: no amax passes */
    ck_assert_int_eq(memcmp(seq, token, sizeof token), 0);
    n = launched("backend=simt,arch=sm_90a,quant=fp8_tensor,fp8_act=static,act=swiglu", 5, 64, 32, 8, 2, seq);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(memcmp(seq, stat, sizeof stat), 0);
}
END_TEST

static const launch_rec *rec_of(int kernel)
{
    for (int i = 0; i < n_recs; i++)
        if (recs[i].kernel == kernel) return &recs[i];
    ck_abort_msg("kernel %d was not launched", kernel);
    return NULL;
}

START_TEST(forward_hands_every_tensor_and_disjoint_workspace_regions_to_the_kernels)
{
    const int64_t T = 7, H = 256, I = 128, E = 6, k = 3, P = T * k, e_local = 2;
    moejit_spec *s = spec_of("backend=simt,arch=sm_90a,quant=fp8_block,act=swiglu,bias=both,"
                             "routing=deepseek_v3,n_group=3,topk_group=2");
    moejit_moe_args a = args_for(s, T, H, I, E, k);
    a.expert_offset = 2, a.num_local_experts = e_local;
    a.routing_bias = (const float *)dev(30);
    a.act_param[2] = (const float *)dev(31);
    ck_assert_msg(forward(s, &a) == MOEJIT_OK, "%s", moejit_last_error());
    const mj_layer_params *p = &recs[0].p;
    ck_assert_uint_eq(p->w1_scale, (uintptr_t)a.w1_scale);
    ck_assert_uint_eq(p->w2_scale, (uintptr_t)a.w2_scale);
    ck_assert_uint_eq(p->b1, (uintptr_t)a.b1);
    ck_assert_uint_eq(p->b2, (uintptr_t)a.b2);
    ck_assert_uint_eq(p->routing_bias, (uintptr_t)a.routing_bias);
    ck_assert_uint_eq(p->act_param[2], (uintptr_t)a.act_param[2]);
    ck_assert_int_eq(p->expert_offset, 2);
    ck_assert_int_eq(p->num_local_experts, 2);
    /* one memset zeroes counts, cursors and both amax words */
    ck_assert_uint_eq(memset_ptr, p->ws_counts);
    ck_assert_uint_eq(memset_count, (size_t)(33 * e_local + 2));
    ck_assert_uint_eq(p->ws_cursors, p->ws_counts + 4 * MJ_ROUTE_COUNT_COPIES * e_local);
    ck_assert_uint_eq(p->ws_amax, p->ws_cursors + 4 * e_local);
    /* the row-tile table between tile_offsets and rows: 16 bytes per tile of the smallest BLOCK_M */
    ck_assert_uint_eq(p->ws_tiles % 256, 0);
    ck_assert_uint_ge(p->ws_tiles, p->ws_tile_offsets + 4 * (e_local + 1));
    ck_assert_uint_ge(p->ws_rows, p->ws_tiles + 16 * (unsigned long long)mj_simt_max_tiles(P, MJ_MIN_BLOCK_M, (int)e_local));
    /* the fp8 regions come after y, in order, 256-aligned, each large enough */
    const unsigned long long regions[][2] = {
        {p->ws_y, (unsigned long long)(P * H * 4)},
        {p->ws_xq, (unsigned long long)(T * H)},
        {p->ws_xscale, (unsigned long long)(4 * T * (H / 128))},
        {p->ws_interq, (unsigned long long)(P * I)},
        {p->ws_interscale, (unsigned long long)(4 * P * (I / 128))},
    };
    for (size_t i = 0; i + 1 < sizeof regions / sizeof regions[0]; i++) {
        ck_assert_uint_eq(regions[i + 1][0] % 256, 0);
        ck_assert_uint_ge(regions[i + 1][0], regions[i][0] + regions[i][1]);
    }
    /* grids: quantization one block per row, GEMM tiles sized for any routing */
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_X_QUANT)->gx, (unsigned)T);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_X_QUANT)->block, MJ_SIMT_QUANT_THREADS);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_INTER_QUANT)->gx, (unsigned)P);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_GEMM1_ACT)->gx, (unsigned)mj_simt_max_tiles(P, 32, (int)e_local));
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_GEMM1_ACT)->gy, (unsigned)(I / 64));
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_GEMM2)->gy, (unsigned)(H / 64));
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_FINALIZE)->gx, (unsigned)T);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_FINALIZE)->gy, (unsigned)((H + MJ_SIMT_FINALIZE_COLS - 1) / MJ_SIMT_FINALIZE_COLS));
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(amax_grid_is_capped_and_fixed_by_the_shape)
{
    forward_ok("backend=simt,arch=sm_90a,quant=fp8_tensor,act=swiglu", 3, 64, 32, 8, 2, NULL);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_X_AMAX)->gx, 1); /* 3·64/8 = 24 chunks */
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_X_AMAX)->block, MJ_SIMT_AMAX_THREADS);
    forward_ok("backend=simt,arch=sm_90a,quant=fp8_tensor,act=swiglu", 4096, 8192, 1024, 8, 2, NULL);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_X_AMAX)->gx, MJ_SIMT_AMAX_MAX_BLOCKS);
    ck_assert_uint_eq(rec_of(MJ_SIMT_K_INTER_AMAX)->gx, MJ_SIMT_AMAX_MAX_BLOCKS);
}
END_TEST

START_TEST(parameter_block_layout_is_pinned)
{
    /* host and device read the same struct; launch.c hands it by pointer to cuLaunchKernel */
    ck_assert_uint_eq(sizeof(mj_layer_params), 320);
    ck_assert_uint_eq(offsetof(mj_layer_params, x), 0);
    ck_assert_uint_eq(offsetof(mj_layer_params, x_scale) % 8, 0);
    ck_assert_uint_eq(offsetof(mj_layer_params, num_tokens) % 8, 0);
}
END_TEST

/* ---- mma and wgmma (launch_mma.c, launch_wgmma.c) ------------------------------------------- */

/* What one tensor-core forward enqueued: launches with their shared memory and whether a GEMM
 * got a tensor map, the opt-in attribute calls, the memset, the encoded maps. The expected
 * numbers were recorded from the launchers before they were merged into shared steps. */
typedef struct tc_launch_rec {
    int kernel;
    unsigned gx, gy, block, smem;
    int map; /* the second parameter's byte, or -1 without one */
    int pdl; /* 1: launched with programmatic stream serialization (cuLaunchKernelEx) */
    unsigned long long routing_bias; /* the parameter block's */
} tc_launch_rec;

static tc_launch_rec tc_recs[16];
static int n_tc_recs, n_tc_attrs, n_tc_maps, tc_attr_smem;
static int tc_splits; /* gemm2_splits of the parameter block the last launch got */
static unsigned tc_box_rows[4]; /* the row extent of each encoded map's box, in order */
static cuuint64_t tc_map_dims[4][3], tc_map_strides[4][2]; /* each encoded map's dims and byte strides */
static unsigned long long tc_b1, tc_b2, tc_act_param[3]; /* the last launch's parameter block's */
static unsigned tc_box_k[4];    /* ... its K extent (elements) */
static int tc_map_type[4];      /* ... its element type */
static unsigned long long tc_row_stride[4]; /* ... the byte stride between rows */

static void tc_record(CUfunction f, unsigned gx, unsigned gy, unsigned bx, unsigned smem, void **params, int pdl)
{
    ck_assert_int_lt(n_tc_recs, 16);
    tc_launch_rec *r = &tc_recs[n_tc_recs++];
    r->kernel = (int)((uintptr_t)f - 1);
    r->gx = gx, r->gy = gy, r->block = bx, r->smem = smem;
    const int k = r->kernel, w4_gemm = bx == MJ_WGMMA_W4_THREADS && (k == MJ_MMA_K_GEMM1_ACT || k == MJ_MMA_K_GEMM2 ||
                                                                    k == MJ_WGMMA_K_GEMM1_ACT_TALL ||
                                                                    k == MJ_WGMMA_K_GEMM2_TALL ||
                                                                    k == MJ_WGMMA_K_GEMM1_ACT_PAIR ||
                                                                    k == MJ_WGMMA_K_GEMM2_PAIR);
    r->map = bx == MJ_WGMMA_THREADS || w4_gemm ? ((const unsigned char *)params[1])[0] : -1;
    tc_splits = ((const mj_layer_params *)params[0])->gemm2_splits;
    r->routing_bias = ((const mj_layer_params *)params[0])->routing_bias;
    const mj_layer_params *lp = (const mj_layer_params *)params[0];
    tc_b1 = lp->b1, tc_b2 = lp->b2;
    for (int i = 0; i < 3; i++) tc_act_param[i] = lp->act_param[i];
    r->pdl = pdl;
}

static CUresult tc_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    ck_assert(gz == 1 && by == 1 && bz == 1 && s == NULL && extra == NULL);
    tc_record(f, gx, gy, bx, smem, params, 0);
    return CUDA_SUCCESS;
}

/* The programmatic launches: exactly one attribute, programmatic serialization on. */
static CUresult tc_launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra)
{
    ck_assert(c->gridDimZ == 1 && c->blockDimY == 1 && c->blockDimZ == 1 && c->hStream == NULL && !extra);
    ck_assert_uint_eq(c->numAttrs, 1);
    ck_assert_int_eq(c->attrs[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    ck_assert_int_eq(c->attrs[0].value.programmaticStreamSerializationAllowed, 1);
    tc_record(f, c->gridDimX, c->gridDimY, c->blockDimX, c->sharedMemBytes, params, 1);
    return CUDA_SUCCESS;
}

static CUresult tc_ctx_device(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }

static CUresult tc_set_attr(CUfunction_attribute a, int v, CUkernel k, CUdevice d)
{
    (void)a, (void)k, (void)d;
    n_tc_attrs++;
    tc_attr_smem = v;
    return CUDA_SUCCESS;
}

static CUresult tc_sm_count(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a, (void)d;
    *v = 132;
    return CUDA_SUCCESS;
}

/* The pair path's residency query: kernel k's function is k's handle; the answer is
 * tc_clusters (0 or a negative result: the refusals), and the config must be the launch's. */
static int tc_clusters = 66, n_tc_cluster_queries;
static unsigned tc_cluster_smem, tc_cluster_block; /* the shared memory and block of the last cluster query */
static CUresult tc_get_function(CUfunction *f, CUkernel k)
{
    *f = (CUfunction)k;
    return CUDA_SUCCESS;
}
static CUresult tc_max_clusters(int *n, CUfunction f, const CUlaunchConfig *c)
{
    const int k = (int)((uintptr_t)f - 1);
    ck_assert(k == MJ_WGMMA_K_GEMM1_ACT_PAIR || k == MJ_WGMMA_K_GEMM2_PAIR);
    /* 4-bit weights: two producer warpgroups and their slots; fp8: the row scales */
    ck_assert((c->blockDimX == 384 && (c->sharedMemBytes == MJ_WGMMA_SMEM || c->sharedMemBytes == MJ_WGMMA_FP8_SMEM)) ||
              (c->blockDimX == MJ_WGMMA_W4_THREADS && c->sharedMemBytes == MJ_WGMMA_W4_SMEM));
    tc_cluster_smem = c->sharedMemBytes, tc_cluster_block = c->blockDimX;
    ck_assert_uint_eq(c->numAttrs, 1);
    ck_assert_int_eq(c->attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
    ck_assert_uint_eq(c->attrs[0].value.clusterDim.x, 2);
    n_tc_cluster_queries++;
    if (tc_clusters < 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    *n = tc_clusters;
    return CUDA_SUCCESS;
}

/* Marks each map with the order it was encoded in (1 = W1, 2 = W2). */
static CUresult tc_encode(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *base, const cuuint64_t *dims,
                          const cuuint64_t *strides, const cuuint32_t *box, const cuuint32_t *es,
                          CUtensorMapInterleave il, CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                          CUtensorMapFloatOOBfill oob)
{
    (void)t, (void)base, (void)es, (void)il, (void)sw, (void)l2, (void)oob;
    ck_assert_uint_eq(rank, 3);
    if (n_tc_maps < 4) {
        tc_box_rows[n_tc_maps] = box[1];
        memcpy(tc_map_dims[n_tc_maps], dims, sizeof tc_map_dims[0]);
        memcpy(tc_map_strides[n_tc_maps], strides, sizeof tc_map_strides[0]);
        tc_box_k[n_tc_maps] = box[0];
        tc_map_type[n_tc_maps] = (int)t;
        tc_row_stride[n_tc_maps] = strides[0];
    }
    memset(m, ++n_tc_maps, sizeof *m);
    return CUDA_SUCCESS;
}

/* The recording driver and a module of MJ_MAX_KERNELS kernels (handle i + 1 for kernel i),
 * with the records cleared. */
static void tc_setup(mj_driver *d, mj_module *m)
{
    *d = fake_driver();
    d->cuLaunchKernel = tc_launch;
    d->cuLaunchKernelEx = tc_launch_ex;
    d->cuCtxGetDevice = tc_ctx_device;
    d->cuKernelSetAttribute = tc_set_attr;
    d->cuDeviceGetAttribute = tc_sm_count;
    d->cuTensorMapEncodeTiled = tc_encode;
    d->cuKernelGetFunction = tc_get_function;
    d->cuOccupancyMaxActiveClusters = tc_max_clusters;
    memset(m, 0, sizeof *m);
    m->n_kernels = MJ_MAX_KERNELS;
    for (int i = 0; i < MJ_MAX_KERNELS; i++) m->kernels[i] = (CUkernel)(uintptr_t)(i + 1);
    n_tc_recs = n_tc_attrs = n_tc_maps = tc_attr_smem = n_tc_cluster_queries = 0;
    memset_count = 0;
}

/* The forward of spec text on T tokens of (H, I, E, k) with E_local experts from offset;
 * checks the workspace size first. */
/* want_bytes: the workspace size to expect (0: not checked) */
static void tc_forward(const char *text, int64_t T, int64_t H, int64_t I, int64_t E, int64_t k, int64_t offset,
                       int64_t local, size_t want_bytes)
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, T, H, I, E, k);
    a.expert_offset = offset, a.num_local_experts = local;
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_OK);
    ck_assert_msg(want_bytes == 0 || bytes == want_bytes, "%s T=%lld: workspace %zu, want %zu", text, (long long)T, bytes, want_bytes);
    mj_driver d;
    mj_module m;
    tc_setup(&d, &m);
    moejit_status st = mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, bytes, NULL, &g_knobs);
    ck_assert_msg(st == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    moejit_spec_destroy(s);
}

/* One workspace sized for a batch serves every smaller batch (a decode batch's own layout may
 * exceed a larger one's: the persistent layer's sync words, a split GEMM2's fp32 partial sums;
 * gpt-oss-120b's mxfp4 layer needed 941568 bytes at 8 tokens against 757760 of its own at 16). */
START_TEST(workspace_for_a_batch_serves_every_smaller_batch)
{
    static const struct { const char *spec; int64_t H, I, E, k; } cases[] = {
        {"backend=wgmma,quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),routing=renormalize,"
         "w1_layout=interleaved,bias=both,arch=sm_90a", 2880, 2880, 128, 4},
        {"backend=mma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a", 2048, 768, 128, 8},
        {"backend=wgmma,act=swiglu,routing=renormalize,arch=sm_90a", 4096, 14336, 8, 2},
    };
    static const int64_t big[] = {32, 48, 64, 96, 512, 4096};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        moejit_spec *s = spec_of(cases[c].spec);
        size_t prev = 0, most = 0;
        moejit_moe_args a = args_for(s, 4096, cases[c].H, cases[c].I, cases[c].E, cases[c].k);
        ck_assert_int_eq(mj_launch_workspace_size(s, &a, &most), MOEJIT_OK);
        for (int64_t i = 0; i < 24 + (int64_t)(sizeof big / sizeof big[0]); i++) {
            const int64_t T = i < 24 ? i + 1 : big[i - 24];
            a = args_for(s, T, cases[c].H, cases[c].I, cases[c].E, cases[c].k);
            size_t bytes = 0;
            ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_OK);
            ck_assert_msg(bytes >= prev, "%s: workspace %zu at T=%lld below %zu at a smaller batch", cases[c].spec,
                          bytes, (long long)T, prev);
            prev = bytes;
            mj_driver d;
            mj_module m;
            tc_setup(&d, &m);
            moejit_status st = mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, most, NULL, &g_knobs);
            ck_assert_msg(st == MOEJIT_OK, "%s T=%lld in the T=4096 workspace: %s", cases[c].spec, (long long)T,
                          moejit_last_error());
        }
        moejit_spec_destroy(s);
    }
}
END_TEST

/* The status of a forward of spec text on T tokens of Qwen3-30B's shape on the fake device. */
static moejit_status qwen3_30b_forward_status(const char *text, int64_t T)
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, T, 2048, 768, 128, 8);
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_OK);
    mj_driver d;
    mj_module m;
    tc_setup(&d, &m);
    const moejit_status st = mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, bytes, NULL, &g_knobs);
    moejit_spec_destroy(s);
    return st;
}

/* GEMM1 (g = 0), GEMM2 (1) and finalize (2) of the last forward: its last three launches
 * (before them 0 to 4: the routing kernels, which depend on T) */
static const tc_launch_rec *tc_gemm(int g)
{
    ck_assert_int_ge(n_tc_recs, 3);
    return &tc_recs[n_tc_recs - 3 + g];
}

static void expect_launches(const char *what, const tc_launch_rec *want, int n)
{
    ck_assert_msg(n_tc_recs == n, "%s: %d launches, want %d", what, n_tc_recs, n);
    for (int i = 0; i < n; i++) {
        const tc_launch_rec *g = &tc_recs[i], *w = &want[i];
        ck_assert_msg(g->kernel == w->kernel && g->gx == w->gx && g->gy == w->gy && g->block == w->block &&
                          g->smem == w->smem && g->map == w->map && g->pdl == w->pdl,
                      "%s: launch %d is kernel %d grid %ux%u block %u smem %u map %d pdl %d; want %d %ux%u %u %u %d %d",
                      what, i, g->kernel, g->gx, g->gy, g->block, g->smem, g->map, g->pdl, w->kernel, w->gx, w->gy,
                      w->block, w->smem, w->map, w->pdl);
    }
}

#define MMA "backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a"
#define WGMMA "backend=wgmma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a"

START_TEST(mma_decode_forward_is_one_fused_routing_launch_then_the_small_gemms)
{
    /* T = 1: no routing launch: gemm1_small_routed (its blocks route the batch), then GEMM2
     * and finalize in one kernel (k = 8 slots, 2048 columns in blocks of 8); no memset; on
     * sm_90a every launch is a programmatic dependent launch, the first too (pdl=inner:
     * below) */
    static const tc_launch_rec want1[] = {{MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED, 216, 1, 128, 92160, -1, 1},
                                          {MJ_MMA_K_GEMM2_FINALIZE_T1, 256, 1, 128, 92160, -1, 1}};
    const char *const specs[] = {MMA, WGMMA}; /* wgmma's decode path is mma's */
    for (int i = 0; i < 2; i++) {
        tc_forward(specs[i], 1, 2048, 768, 128, 8, 0, 0, 64512);
        expect_launches(specs[i], want1, 2);
        ck_assert_int_eq(memset_count, 0);
        ck_assert_int_eq(n_tc_attrs, 2); /* smem opt-in of the two GEMMs */
        ck_assert_int_eq(tc_attr_smem, 92160);
        ck_assert_int_eq(n_tc_maps, 0);
    }
    /* T = 2..32 in the chain: route_fused_small, gemm1/gemm2 small (max tiles 3 + 40 at T = 5:
     * 24 x 43 and 32 x 43), finalize; the fused kernel counts in shared memory, so still no
     * memset (Qwen3-30B takes the persistent layer up to 8 tokens unless told: below) */
    static const tc_launch_rec want[] = {{9, 1, 1, 512, 0, -1, 1},
                                         {7, 24 * 43, 1, 128, 92160, -1, 1},
                                         {8, 32 * 43, 1, 128, 92160, -1, 1},
                                         {5, 5, 4, 128, 0, -1, 1}};
    g_knobs.decode = MJ_DECODE_CHAIN;
    for (int i = 0; i < 2; i++) {
        tc_forward(specs[i], 5, 2048, 768, 128, 8, 0, 0, 0);
        expect_launches(specs[i], want, 4);
        ck_assert_int_eq(memset_count, 0);
    }
    g_knobs.decode = MJ_DECODE_AUTO;
    tc_forward(MMA, 5, 2048, 768, 128, 8, 0, 0, 0); /* 40 x 24 GEMM1 tiles: the shallow blocks */
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_DECODE_PERSISTENT_SHALLOW);
    tc_forward(MMA, 9, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[0].kernel, 9); /* past MJ_MMA_PERSISTENT_MAX_TOKENS: the chain */
    /* T = 2: 16 x 24 GEMM1 tiles outnumber 264 blocks: the persistent layer, or told otherwise
     * the fused routing kernel and the chain */
    tc_forward(MMA, 2, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_DECODE_RESET);
    g_knobs.decode = MJ_DECODE_CHAIN;
    tc_forward(MMA, 2, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[0].kernel, 9);
    g_knobs.decode = MJ_DECODE_AUTO;
    /* T = 1 with more slots than the one-kernel GEMM2 holds (k = 10): GEMM2 small, finalize */
    static const tc_launch_rec want_k10[] = {{MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED, 24 * 11, 1, 128, 92160, -1, 1},
                                             {MJ_MMA_K_GEMM2_SMALL, 32 * 11, 1, 128, 92160, -1, 1},
                                             {MJ_MMA_K_FINALIZE, 1, 4, 128, 0, -1, 1}};
    tc_forward(MMA, 1, 2048, 768, 128, 10, 0, 0, 0);
    expect_launches(MMA, want_k10, 3);
    /* ... k = 6 (Nemotron) takes the shallow one-kernel GEMM2 (6 stages: its smem); k = 7 and an
     * expert-parallel rank (4 of 128 experts local) keep GEMM2 small and finalize; all 128
     * experts local (named) is one kernel */
    static const int64_t t1_cases[][4] = {{6, 0, 2, MJ_MMA_K_GEMM2_FINALIZE_T1_SHALLOW},
                                          {7, 0, 3, MJ_MMA_K_GEMM2_SMALL},
                                          {8, 4, 3, MJ_MMA_K_GEMM2_SMALL},
                                          {8, 128, 2, MJ_MMA_K_GEMM2_FINALIZE_T1}}; /* k, local, launches, GEMM2 */
    g_knobs.decode = MJ_DECODE_CHAIN; /* 58 x 6 GEMM1 tiles would take the persistent layer */
    for (size_t c = 0; c < sizeof t1_cases / sizeof t1_cases[0]; c++) {
        const int64_t k = t1_cases[c][0], local = t1_cases[c][1], n = t1_cases[c][2];
        tc_forward(WGMMA, 1, 2688, 1856, 128, k, 0, local, 0);
        ck_assert_int_eq(n_tc_recs, n);
        ck_assert_int_eq(tc_recs[1].kernel, t1_cases[c][3]);
        ck_assert_uint_eq(tc_recs[1].gx, n == 2 ? 2688 / 8 : 42 * (1 + (local ? (k < local ? k : local) : k)));
        ck_assert_uint_eq(tc_recs[1].smem, k == 6 ? 6 * 80 * 128 : 9 * 80 * 128);
        moejit_spec *sp = spec_of(WGMMA);
        moejit_moe_args a = args_for(sp, 1, 2688, 1856, 128, k);
        if (local) a.num_local_experts = local;
        ck_assert_int_eq(plan_of(sp, &a, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO).t1_fused, n == 2);
        moejit_spec_destroy(sp);
    }
    g_knobs.decode = MJ_DECODE_AUTO;
    /* precomputed ids may repeat an expert within a token, which the routed GEMM1 cannot
     * tile: T = 1 takes the fused routing kernel */
    tc_forward("backend=mma,quant=bf16,act=swiglu,routing=precomputed,arch=sm_90a", 1, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(n_tc_recs, 4);
    ck_assert_int_eq(tc_recs[0].kernel, 9);
    ck_assert_int_eq(tc_recs[1].kernel, 7);
    /* T = 16: the fused routing kernel (a token per warp), no memset; T = 17 and 32: the route
     * kernel (3 and 4 blocks) and the offsets kernel, which scatters */
    for (int i = 0; i < 2; i++) {
        tc_forward(specs[i], 16, 2048, 768, 128, 8, 0, 0, 0);
        ck_assert_int_eq(n_tc_recs, 4);
        ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_ROUTE_FUSED_SMALL);
        ck_assert_int_eq(memset_count, 0);
        for (int T = 17; T <= 32; T += 15) {
            tc_forward(specs[i], T, 2048, 768, 128, 8, 0, 0, 0);
            ck_assert_int_eq(n_tc_recs, 5);
            ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_ROUTE);
            ck_assert_uint_eq(tc_recs[0].gx, (unsigned)(T + 7) / 8);
            ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_EXPERT_OFFSETS_SMALL);
            ck_assert_int_eq(memset_count, 0);
        }
    }
    /* T = 33: past the fused routing, still the small path: route (5 blocks, each zeroing its
     * own counter copy: no memset), offsets_small (which also scatters the 264 pairs) */
    static const tc_launch_rec want33[] = {{0, 5, 1, 256, 0, -1, 1},
                                           {6, 1, 1, 512, 0, -1, 1},
                                           {7, 24 * 145, 1, 128, 92160, -1, 1},
                                           {8, 32 * 145, 1, 128, 92160, -1, 1},
                                           {5, 33, 4, 128, 0, -1, 1}};
    for (int i = 0; i < 2; i++) {
        tc_forward(specs[i], 33, 2048, 768, 128, 8, 0, 0, 1511680);
        expect_launches(specs[i], want33, 5);
        ck_assert_int_eq(memset_count, 0);
    }
}
END_TEST

/* The forward of spec text on T tokens of Qwen3-30B's shape with k slots (deepseek_v3 with a
 * selection bias) on the fake device; *bytes receives the workspace size. */
static void qwen3_30b_routed_forward(const char *text, int64_t T, int64_t k, size_t *bytes)
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, T, 2048, 768, 128, k);
    if (s->routing == MJ_ROUTING_DEEPSEEK_V3) a.routing_bias = (const float *)dev(23);
    ck_assert_msg(mj_launch_workspace_size(s, &a, bytes) == MOEJIT_OK, "%s: %s", text, moejit_last_error());
    mj_driver d;
    mj_module m;
    tc_setup(&d, &m);
    const moejit_status st = mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, *bytes, NULL, &g_knobs);
    ck_assert_msg(st == MOEJIT_OK, "%s T=%lld: %s", text, (long long)T, moejit_last_error());
    moejit_spec_destroy(s);
}

/* Every routing method (and bf16 logits) on mma and wgmma launches what renormalize launches
 * at the same shape and batch, with the same workspace: no extra launch at decode (T = 1: the
 * GEMM1 blocks route and GEMM2 finalizes; 2 and 5: the persistent layer, deep and shallow; 9:
 * the fused routing kernel; 33: route and offsets; 300: large; 4096: wgmma's pairs), and
 * deepseek_v3's selection bias reaches every kernel's parameter block. */
START_TEST(every_routing_method_launches_what_renormalize_launches)
{
    static const char *const routings[] = {"sigmoid_topk",
                                           "sigmoid_renorm",
                                           "deepseek_v3,n_group=8,topk_group=4,routed_scaling=2.5",
                                           "llama4",
                                           "softmax_topk,logits=bf16",
                                           "deepseek_v3,n_group=4,topk_group=2,logits=bf16",
                                           "llama4,logits=bf16"};
    static const int64_t Ts[] = {1, 2, 5, 9, 33, 300, 4096};
    static const char *const backends[] = {"mma", "wgmma"};
    for (int b = 0; b < 2; b++)
        for (size_t r = 0; r < sizeof routings / sizeof routings[0]; r++)
            for (size_t t = 0; t < sizeof Ts / sizeof Ts[0]; t++) {
                const int64_t k = strstr(routings[r], "llama4") ? 1 : 8;
                char ref[160], text[200];
                snprintf(ref, sizeof ref, "backend=%s,quant=bf16,act=swiglu,routing=renormalize,arch=sm_90a", backends[b]);
                snprintf(text, sizeof text, "backend=%s,quant=bf16,act=swiglu,routing=%s,arch=sm_90a", backends[b],
                         routings[r]);
                size_t want_bytes = 0, bytes = 0;
                qwen3_30b_routed_forward(ref, Ts[t], k, &want_bytes);
                tc_launch_rec want[16];
                const int n = n_tc_recs;
                const size_t want_memsets = memset_count;
                memcpy(want, tc_recs, sizeof want);
                qwen3_30b_routed_forward(text, Ts[t], k, &bytes);
                ck_assert_msg(bytes == want_bytes, "%s T=%lld: workspace %zu, renormalize's %zu", text,
                              (long long)Ts[t], bytes, want_bytes);
                ck_assert_uint_eq(memset_count, want_memsets);
                expect_launches(text, want, n);
                const int dsv3 = strstr(routings[r], "deepseek_v3") != NULL;
                for (int i = 0; i < n_tc_recs; i++)
                    ck_assert_msg(tc_recs[i].routing_bias == (dsv3 ? (uintptr_t)dev(23) : 0),
                                  "%s T=%lld: launch %d has routing_bias %#llx", text, (long long)Ts[t], i,
                                  tc_recs[i].routing_bias);
            }
}
END_TEST

static void odd_routing_bias(moejit_moe_args *a) { a->routing_bias = (const float *)((const char *)dev(23) + 2); }
static void add_routing_bias_tc(moejit_moe_args *a) { a->routing_bias = (const float *)dev(23); }

/* The routing rules and the selection bias are checked on the tensor-core backends as for
 * simt, naming the field; nothing is enqueued. */
START_TEST(tensor_core_routing_arguments_are_checked_naming_the_field)
{
    static const char *const backends[] = {"backend=mma,arch=sm_80", "backend=wgmma,arch=sm_90a"};
    for (int b = 0; b < 2; b++) {
        char dsv3[200], llama4[160], sig[160];
        snprintf(dsv3, sizeof dsv3, "%s,quant=bf16,act=swiglu,routing=deepseek_v3,n_group=8,topk_group=2", backends[b]);
        snprintf(llama4, sizeof llama4, "%s,quant=fp16,act=relu2,routing=llama4,logits=bf16", backends[b]);
        snprintf(sig, sizeof sig, "%s,quant=bf16,act=gelu,routing=sigmoid_renorm", backends[b]);
        forward_fails(dsv3, 4, 64, 32, 12, 2, NULL,
                      "args.num_experts: routing=deepseek_v3 needs num_experts divisible by n_group (8), got 12");
        forward_fails(dsv3, 4, 64, 32, 16, 5, NULL,
                      "args.topk: routing=deepseek_v3 chooses among topk_group x num_experts/n_group = 2 x 2 = 4 "
                      "experts, got 5");
        forward_fails(dsv3, 4, 64, 32, 16, 4, odd_routing_bias,
                      "args.routing_bias: must be 4-byte aligned (fp32 elements)");
        forward_fails(llama4, 4, 64, 32, 16, 2, NULL, "args.topk: routing=llama4 is top-1, must be 1, got 2");
        forward_fails(llama4, 4, 64, 32, 16, 1, add_routing_bias_tc,
                      "args.routing_bias: must be NULL: only deepseek_v3 routing has a selection bias");
        forward_fails(sig, 4, 64, 32, 16, 2, add_routing_bias_tc,
                      "args.routing_bias: must be NULL: only deepseek_v3 routing has a selection bias");
        /* the workspace size applies the same rules */
        moejit_spec *s = spec_of(llama4);
        moejit_moe_args a = args_for(s, 4, 64, 32, 16, 2);
        size_t bytes = 1;
        expect_error(mj_launch_workspace_size(s, &a, &bytes), llama4, "args.topk: routing=llama4 is top-1");
        ck_assert_uint_eq(bytes, 0);
        moejit_spec_destroy(s);
        /* deepseek_v3's selection bias is optional */
        tc_forward(dsv3, 4, 64, 32, 16, 4, 0, 0, 0);
        ck_assert_uint_eq(tc_recs[0].routing_bias, 0);
    }
}
END_TEST

/* The route kernel's blocks zero their own counter copy (block 0 also the cursors) while the
 * grid has at most one block per copy (MJ_ROUTE_COUNT_COPIES blocks of 8 tokens: T <= 256);
 * past that one memset zeroes all copies and the cursors first (common/params.h). Offsets sum
 * only the copies the route blocks wrote, and scatter the pairs themselves where they fit one
 * scatter block. Both backends, the small and the large path. */
START_TEST(route_blocks_zero_their_own_counters_and_offsets_scatter_small_batches)
{
    ck_assert_int_eq(MJ_ROUTE_COUNT_COPIES * MJ_ROUTE_TOKENS_PER_BLOCK, 256);
    ck_assert_int_eq(MJ_ROUTE_COPIES_USED(33), 5);
    ck_assert_int_eq(MJ_ROUTE_COPIES_USED(256), 32);
    ck_assert_int_eq(MJ_ROUTE_COPIES_USED(257), 32);
    ck_assert_int_eq(MJ_ROUTE_COPIES_USED(100000), 32);
    static const char *const specs[] = {MMA, WGMMA};
    static const int64_t cases[][2] = {{64, 0}, {255, 0}, {256, 0}, {257, 1}, {4096, 1}}; /* T, memset */
    for (int i = 0; i < 2; i++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            const int64_t T = cases[c][0];
            tc_forward(specs[i], T, 2048, 768, 128, 8, 0, 0, 0);
            ck_assert_msg(tc_recs[0].kernel == MJ_MMA_K_ROUTE, "%s T=%lld: route first", specs[i], (long long)T);
            ck_assert_uint_eq(tc_recs[0].gx, (unsigned)((T + 7) / 8));
            ck_assert_uint_eq(memset_count, cases[c][1] ? 33 * 128 : 0);
            /* up to 2048 pairs (one scatter block) the offsets kernel scatters them itself */
            const int scattered_by_offsets = T * 8 <= MJ_SCATTER_PAIRS_PER_BLOCK;
            ck_assert_int_eq(n_tc_recs, scattered_by_offsets ? 5 : 6);
            ck_assert_int_eq(tc_recs[2].kernel == MJ_MMA_K_SCATTER, !scattered_by_offsets);
        }
    ck_assert(MJ_OFFSETS_SCATTER(2048) && !MJ_OFFSETS_SCATTER(2049));
}
END_TEST

/* A decode GEMM2 expected to have fewer than 400 live CTAs over a long I is split in two along
 * K (common/mma_params.h): Mixtral-8x7B (64 column tiles, k = 2 of 8 experts) expects 128 live
 * at T = 1, 350 at T = 4, 460 at T = 8. Split: twice the CTAs, two copies of y; finalize gets
 * the split count in the parameter block. */
START_TEST(decode_gemm2_is_split_along_k_when_its_grid_is_small)
{
    const long long k16 = MJ_MMA_SPLIT_MIN_K, k4 = MJ_W4_SPLIT_MIN_K;
    ck_assert_int_eq(mj_gemm_plan_chain_splits(64, 1, 2, 8, 8, 14336, k16), 2);
    ck_assert_int_eq(mj_gemm_plan_chain_splits(64, 4, 2, 8, 8, 14336, k16), 2);
    ck_assert_int_eq(mj_gemm_plan_chain_splits(64, 8, 2, 8, 8, 14336, k16), 1);       /* 460 expected live */
    ck_assert_int_eq(mj_gemm_plan_chain_splits(64, 8, 2, 8, 2, 14336, k16), 2);       /* 2 local experts: 115 */
    ck_assert_int_eq(mj_gemm_plan_chain_splits(64, 1, 2, 8, 8, 4095, k16), 1);        /* a half would be < 2048 */
    ck_assert_int_eq(mj_gemm_plan_chain_splits(64, 1000000, 1, 512, 8, 8192, k16), 1); /* all touched: 512 */
    ck_assert_int_eq(mj_gemm_plan_chain_splits(32, 1, 8, 128, 128, 768, k16), 1);     /* Qwen3-30B: I too short */
    /* 4-bit rows split from halves of 1024: gpt-oss-120b (45 column tiles, k = 4 of 128, I = 2880) at T = 1 */
    ck_assert_int_eq(mj_gemm_plan_chain_splits(45, 1, 4, 128, 128, 2880, k16), 1);
    ck_assert_int_eq(mj_gemm_plan_chain_splits(45, 1, 4, 128, 128, 2880, k4), 2);
    ck_assert_int_eq(mj_gemm_plan_chain_splits(32, 1, 8, 128, 128, 768, k4), 1);
    static const tc_launch_rec want[] = {{MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED, 1344, 1, 128, 92160, -1, 1},
                                         {8, 384, 1, 128, 92160, -1, 1},
                                         {5, 1, 8, 128, 0, -1, 1}};
    const char *const specs[] = {MMA, WGMMA};
    g_knobs.decode = MJ_DECODE_CHAIN; /* at T = 1 Mixtral takes the persistent layer */
    for (int i = 0; i < 2; i++) {
        /* ids .. rows: 6 regions of 256 bytes and the counters (33 x 8 int32: 1280); inter
         * 2 x 14336 x 2; y 8 copies of 2 x 4096 x 4 (fp32 partial sums: the persistent
         * layer's 8 splits, which the workspace holds whichever layer runs) */
        tc_forward(specs[i], 1, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 57344 + 8 * 32768);
        expect_launches(specs[i], want, 3);
        ck_assert_int_eq(tc_splits, 2);
    }
    g_knobs.decode = MJ_DECODE_AUTO;
    /* the large path never splits: one copy of y, in the dtype (2 x 4096 x 2) */
    tc_forward(MMA ",tile=large", 1, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 57344 + 16384);
    ck_assert_int_eq(tc_splits, 1);
    /* Qwen3-30B at T = 1: I = 768, no split */
    tc_forward(MMA, 1, 2048, 768, 128, 8, 0, 0, 64512);
    ck_assert_int_eq(tc_splits, 1);
    /* Mixtral at T = 4 (9 row tiles: 64 x 9 x 2 GEMM2 CTAs) splits, at T = 8 not; inter 2k x
     * 14336 x 2 bytes, y 2 x 2k x 4096 x 4 (split: fp32 partial sums) or 2k x 4096 x 2; at T = 4
     * the workspace holds the persistent layer's 8 copies, which it takes unless told */
    g_knobs.decode = MJ_DECODE_CHAIN;
    tc_forward(WGMMA, 4, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 229376 + 8 * 131072);
    ck_assert_int_eq(tc_splits, 2);
    ck_assert_uint_eq(tc_recs[2].gx, 64 * 9 * 2); /* GEMM2 after the fused routing and GEMM1 */
    g_knobs.decode = MJ_DECODE_AUTO;
    tc_forward(WGMMA, 4, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 229376 + 8 * 131072);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_DECODE_PERSISTENT);
    ck_assert_int_eq(tc_splits, 8);
    /* at T = 8 (the persistent layer's 8 copies of y: 8 x 16 x 4096 x 4 bytes) */
    g_knobs.decode = MJ_DECODE_CHAIN;
    tc_forward(WGMMA, 8, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 458752 + 8 * 262144);
    ck_assert_int_eq(tc_splits, 1);
    ck_assert_uint_eq(tc_recs[2].gx, 64 * 9); /* GEMM2 after the fused routing and GEMM1 */
    g_knobs.decode = MJ_DECODE_AUTO;
    tc_forward(WGMMA, 8, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 458752 + 8 * 262144);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_DECODE_PERSISTENT);
    ck_assert_int_eq(tc_splits, 8);
}
END_TEST

START_TEST(a_few_tokens_take_the_persistent_layer_when_gemm1_outnumbers_the_resident_blocks)
{
    /* Mixtral at T = 1 on 132 SMs: 2 x 448 GEMM1 tiles > 264 blocks: the reset kernel, then
     * one grid of 2 blocks per SM with the small GEMMs' shared memory (448 tiles per expert
     * outnumber even 3 blocks per SM: not the shallow blocks); its GEMM2 split in 8 */
    static const tc_launch_rec want[] = {{MJ_MMA_K_DECODE_RESET, 1, 1, MJ_MMA_DECODE_RESET_THREADS, 0, -1, 1},
                                         {MJ_MMA_K_DECODE_PERSISTENT, 264, 1, 128, 92160, -1, 1}};
    static const tc_launch_rec want_shallow[] = {
        {MJ_MMA_K_DECODE_RESET, 1, 1, MJ_MMA_DECODE_RESET_THREADS, 0, -1, 1},
        {MJ_MMA_K_DECODE_PERSISTENT_SHALLOW, 396, 1, 128, 61440, -1, 1}};
    const char *const specs[] = {MMA, WGMMA};
    for (int i = 0; i < 2; i++) {
        tc_forward(specs[i], 1, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 57344 + 8 * 32768);
        expect_launches(specs[i], want, 2);
        ck_assert_int_eq(tc_splits, 8);
        ck_assert_int_eq(memset_count, 0); /* the reset kernel zeroes the sync words */
        ck_assert_int_eq(tc_attr_smem, 92160);
    }
    /* told: the shallow blocks, 3 per SM with 6 stages of the small GEMMs' 10 KiB */
    g_knobs.decode = MJ_DECODE_PERSISTENT_SHALLOW;
    tc_forward(WGMMA, 1, 4096, 14336, 8, 2, 0, 0, 6 * 256 + 1280 + 57344 + 8 * 32768);
    expect_launches("mixtral shallow", want_shallow, 2);
    ck_assert_int_eq(tc_attr_smem, 61440);
    g_knobs.decode = MJ_DECODE_AUTO;
    /* Qwen3-235B at T = 2 (16 x 48 GEMM1 tiles: 1.9 rounds of 3 x 132) takes them by the rule */
    for (int i = 0; i < 2; i++) {
        tc_forward(specs[i], 2, 4096, 1536, 128, 8, 0, 0, 0);
        expect_launches(specs[i], want_shallow, 2);
        ck_assert_int_eq(tc_splits, 2);
    }
    moejit_spec *sp = spec_of(WGMMA);
    moejit_moe_args a = args_for(sp, 1, 4096, 14336, 8, 2);
    ck_assert_int_eq(plan_of(sp, &a, 132, g_knobs.decode).persistent_splits, 8);
    ck_assert_int_eq(plan_of(sp, &a, 448, g_knobs.decode).persistent_splits, 0); /* 896 tiles in one wave of 2 x 448 */
    a.num_tokens = 8; /* up to MJ_MMA_PERSISTENT_MAX_TOKENS: a GEMM1 tile (k 4096) <= 4 x a GEMM2 tile's (1792) */
    ck_assert_int_eq(plan_of(sp, &a, 132, g_knobs.decode).persistent_splits, 8);
    a.num_tokens = 9;
    ck_assert_int_eq(plan_of(sp, &a, 132, g_knobs.decode).persistent_splits, 0);
    /* Qwen3-235B: from 5 tokens its GEMM1 tiles (k 4096) outlast 4 of its GEMM2 tiles (768) */
    moejit_moe_args q = args_for(sp, 4, 4096, 1536, 128, 8);
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_splits, 2);
    q.num_tokens = 5;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_splits, 0);
    g_knobs.decode = MJ_DECODE_PERSISTENT; /* unless told */
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_splits, 2);
    g_knobs.decode = MJ_DECODE_PERSISTENT_SHALLOW;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_splits, 2);
    g_knobs.decode = MJ_DECODE_AUTO;
    /* its blocks: Qwen3-235B at T = 1 (8 x 48 = 384 GEMM1 tiles, under 1.5 rounds of 3 x 132)
     * the deep ones, at T = 2 (16 x 48) the shallow ones; as told either way */
    q.num_tokens = 1;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_splits, 2);
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_shallow, 0);
    q.num_tokens = 2;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_shallow, 1);
    g_knobs.decode = MJ_DECODE_PERSISTENT_DEEP;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_shallow, 0);
    q.num_tokens = 1;
    g_knobs.decode = MJ_DECODE_PERSISTENT_SHALLOW;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_shallow, 1);
    g_knobs.decode = MJ_DECODE_CHAIN; /* no persistent layer: no blocks of it */
    q.num_tokens = 2;
    ck_assert_int_eq(plan_of(sp, &q, 132, g_knobs.decode).persistent_shallow, 0);
    g_knobs.decode = MJ_DECODE_AUTO;
    moejit_spec_destroy(sp);
    /* ... on an SM of 228 KiB only (three blocks of 60 + 7 KiB): sm_86's runs the deep ones */
    moejit_spec *s86 = spec_of("backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_86");
    moejit_moe_args q86 = args_for(s86, 2, 4096, 1536, 128, 8);
    ck_assert_int_eq(plan_of(s86, &q86, 132, g_knobs.decode).persistent_splits, 2);
    ck_assert_int_eq(plan_of(s86, &q86, 132, g_knobs.decode).persistent_shallow, 0);
    moejit_spec_destroy(s86);
    /* the rule itself: at least 1.5 rounds of 3 blocks per SM (2 x tiles >= 9 x SMs) */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(8, 1536, 1, 132), 0);  /* 384 tiles */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(16, 1536, 1, 132), 1); /* 768 */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(12, 1856, 0, 132), 0); /* ungated: 12 x 29 */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(24, 1856, 0, 132), 1); /* 24 x 29 */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(2, 297 * 32, 1, 132), 1); /* 594: inclusive */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(1, 593 * 32, 1, 132), 0);
    /* ... unless one expert's tiles alone outnumber the 396 blocks (Mixtral-8x7B: 448) */
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(8, 14336, 1, 132), 0);
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(8, 395 * 32, 1, 132), 1);
    ck_assert_int_eq(mj_gemm_plan_persistent_shallow(8, 396 * 32, 1, 132), 0);
    /* the shape rule itself: Qwen3-30B (2048 vs 768), Nemotron (2688 vs 960) take 5..8 tokens;
     * DeepSeek-V3 (7168 vs 1024) keeps the chain; every shape takes 1..4 */
    ck_assert_int_eq(mj_gemm_plan_persistent_shape(8, 2048, 768), 1);
    ck_assert_int_eq(mj_gemm_plan_persistent_shape(8, 2688, 1856), 1);
    ck_assert_int_eq(mj_gemm_plan_persistent_shape(5, 7168, 2048), 0);
    ck_assert_int_eq(mj_gemm_plan_persistent_shape(4, 7168, 2048), 1);
    ck_assert_int_eq(mj_gemm_plan_persistent_shape(8, 3072, 768), 1); /* the bound is inclusive */
    ck_assert_int_eq(mj_gemm_plan_persistent_shape(8, 3080, 768), 0);
    /* Qwen3-30B (8 x 24 tiles: one wave) keeps the chain, unless told */
    tc_forward(WGMMA, 1, 2048, 768, 128, 8, 0, 0, 64512);
    ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED);
    g_knobs.decode = MJ_DECODE_PERSISTENT;
    tc_forward(WGMMA, 1, 2048, 768, 128, 8, 0, 0, 64512);
    expect_launches("qwen3-30b forced", want, 2);
    ck_assert_int_eq(tc_splits, 1); /* I = 768: runs of ~1024 */
    /* ... but never with precomputed ids (they may repeat an expert) */
    tc_forward("backend=wgmma,quant=bf16,act=swiglu,routing=precomputed,arch=sm_90a", 1, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_ROUTE_FUSED_SMALL);
    g_knobs.decode = MJ_DECODE_AUTO;
    /* the split rule: the power of two nearest I / 1024, at most 8 */
    ck_assert_int_eq(mj_gemm_plan_persistent_splits(768), 1);
    ck_assert_int_eq(mj_gemm_plan_persistent_splits(1536), 2);
    ck_assert_int_eq(mj_gemm_plan_persistent_splits(2048), 2);
    ck_assert_int_eq(mj_gemm_plan_persistent_splits(4104), 4);
    ck_assert_int_eq(mj_gemm_plan_persistent_splits(14336), 8);
    ck_assert_int_eq(mj_gemm_plan_persistent_splits(1 << 20), 8);
    /* one local expert of a wide layer: its 121 sync words (1 + 1 tile x 8 splits + 7168 / 64)
     * outgrow the 33 counters by 352 bytes, so the batch-1 workspace has 512 bytes (256-byte
     * regions) more than routing=precomputed's */
    moejit_spec *r = spec_of(WGMMA), *pre = spec_of("backend=wgmma,quant=bf16,act=swiglu,routing=precomputed,arch=sm_90a");
    moejit_moe_args ar = args_for(r, 1, 7168, 768, 8, 2), ap = args_for(pre, 1, 7168, 768, 8, 2);
    ar.num_local_experts = ap.num_local_experts = 1;
    size_t br = 0, bp = 0;
    ck_assert_int_eq(mj_launch_workspace_size(r, &ar, &br), MOEJIT_OK);
    ck_assert_int_eq(mj_launch_workspace_size(pre, &ap, &bp), MOEJIT_OK);
    ck_assert_uint_eq(br - bp, 512);
    moejit_spec_destroy(r), moejit_spec_destroy(pre);
}
END_TEST


START_TEST(mma_large_forward_launches_the_tiled_gemms)
{
    static const tc_launch_rec want[] = {{0, 512, 1, 256, 0, -1, 1},     {1, 1, 1, 512, 0, -1, 1},
                                         {2, 16, 1, 256, 0, -1, 1},     {3, 4608, 1, 256, 98304, -1, 1},
                                         {4, 6144, 1, 256, 98304, -1, 1}, {5, 4096, 2, 128, 0, -1, 1}};
    tc_forward(MMA, 4096, 2048, 768, 128, 8, 0, 0, 184995840);
    expect_launches(MMA, want, 6);
    ck_assert_int_eq(memset_count, 33 * 128);
    ck_assert_int_eq(tc_attr_smem, 98304);
    /* expert parallel, precomputed routing, ungated: counters of E_local = 4 experts */
    const char *ep = "backend=mma,quant=fp16,act=relu2,routing=precomputed,arch=sm_80";
    tc_forward(ep, 1000, 4096, 14336, 8, 2, 2, 4, 73756160);
    ck_assert_int_eq(memset_count, 33 * 4);
    ck_assert_int_eq(tc_recs[0].gx, 125);
    ck_assert_int_eq(n_tc_recs, 5); /* 2000 pairs fit one scatter block: the offsets kernel scatters them */
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_EXPERT_OFFSETS);
    ck_assert_int_eq(tc_gemm(0)->gx, 2240);
    ck_assert_int_eq(tc_gemm(2)->gx, 1000);
    ck_assert_int_eq(tc_gemm(2)->gy, 4); /* 4096 columns, 8 per thread: 1000 x 8 narrow blocks would be >= 4096 */
    /* the finalize's width rule (common/params.h): 8 columns per thread from 4096 narrow
     * blocks on, and never over a split GEMM2's fp32 partial sums */
    ck_assert(!MJ_TC_FINALIZE_WIDE(1023, 2048, 1));
    ck_assert(MJ_TC_FINALIZE_WIDE(1024, 2048, 1));
    ck_assert(MJ_TC_FINALIZE_WIDE(1024, 2048, 0));
    ck_assert(!MJ_TC_FINALIZE_WIDE(1 << 20, 2048, 2));
    ck_assert(MJ_TC_FINALIZE_WIDE(293, 7168, 1) && !MJ_TC_FINALIZE_WIDE(292, 7168, 1)); /* 14 chunks */
    /* sm_80 has no griddepcontrol: every launch is a plain, stream-ordered one */
    for (int i = 0; i < n_tc_recs; i++) ck_assert_int_eq(tc_recs[i].pdl, 0);
}
END_TEST

START_TEST(wgmma_large_forward_runs_persistent_gemms_with_their_tensor_maps)
{
    /* min(132 SMs, tiles) CTAs of 384 threads; GEMM1 gets the W1 map, GEMM2 the W2 map */
    static const tc_launch_rec want[] = {{0, 512, 1, 256, 0, -1, 1},      {1, 1, 1, 512, 0, -1, 1},
                                         {2, 16, 1, 256, 0, -1, 1},      {3, 132, 1, 384, 197888, 1, 1},
                                         {4, 132, 1, 384, 197888, 2, 1},  {5, 4096, 2, 128, 0, -1, 1}};
    tc_forward(WGMMA ",tile=large", 4096, 2048, 768, 128, 8, 0, 0, 184995840);
    expect_launches(WGMMA, want, 6);
    ck_assert_int_eq(n_tc_maps, 2);
    ck_assert_int_eq(tc_attr_smem, 197888);
    /* boxes: gated W1 half a tile (128 up or gate rows), W2 the tile's 256 rows */
    ck_assert_uint_eq(tc_box_rows[0], 128);
    ck_assert_uint_eq(tc_box_rows[1], 256);
    /* tile=auto at 64 rows per expert (B=1024): still the large path */
    tc_forward(WGMMA, 1024, 2048, 768, 128, 8, 0, 0, 46264320);
    ck_assert_int_eq(tc_recs[1].kernel, 1);
    ck_assert_int_eq(tc_gemm(0)->kernel, 3);
}
END_TEST

/* W1's tensor map follows the layout (launch_wgmma.c, w1_map_shape): planes of I rows, two
 * per expert, for up_gate and gate_up (the kernel picks which is up); for interleaved rows 2H
 * apart and planes one row apart, 2I per expert; ungated, one plane per expert. W2's is the
 * same for every layout. */
START_TEST(wgmma_w1_map_follows_the_layout)
{
    const int64_t H = 2048, I = 768, E = 128;
    static const struct { const char *extra; cuuint64_t planes, row_stride, plane_stride; } cases[] = {
        {"", 2 * 128, 2048 * 2, 768 * 2048 * 2},
        {",w1_layout=gate_up", 2 * 128, 2048 * 2, 768 * 2048 * 2},
        {",w1_layout=interleaved", 2 * 768 * 128, 2 * 2048 * 2, 2048 * 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, WGMMA ",tile=large%s", cases[i].extra);
        tc_forward(text, 4096, H, I, E, 8, 0, 0, 0);
        ck_assert_int_eq(n_tc_maps, 2);
        ck_assert_uint_eq(tc_map_dims[0][0], H);
        ck_assert_uint_eq(tc_map_dims[0][1], I);
        ck_assert_msg(tc_map_dims[0][2] == cases[i].planes && tc_map_strides[0][0] == cases[i].row_stride &&
                          tc_map_strides[0][1] == cases[i].plane_stride,
                      "%s: W1 map planes %llu, strides %llu, %llu", text, (unsigned long long)tc_map_dims[0][2],
                      (unsigned long long)tc_map_strides[0][0], (unsigned long long)tc_map_strides[0][1]);
        ck_assert_uint_eq(tc_box_rows[0], 128); /* half a tile: the up or the gate rows */
        ck_assert(tc_map_dims[1][0] == (cuuint64_t)I && tc_map_dims[1][1] == (cuuint64_t)H && tc_map_dims[1][2] == (cuuint64_t)E);
        ck_assert(tc_map_strides[1][0] == (cuuint64_t)I * 2 && tc_map_strides[1][1] == (cuuint64_t)(H * I * 2));
    }
    /* ungated: one plane of I rows per expert, whatever the layout */
    tc_forward("backend=wgmma,quant=bf16,act=relu2,arch=sm_90a,tile=large,w1_layout=interleaved", 4096, H, I, E, 8, 0,
               0, 0);
    ck_assert(tc_map_dims[0][2] == (cuuint64_t)E && tc_map_strides[0][0] == (cuuint64_t)H * 2 &&
              tc_map_strides[0][1] == (cuuint64_t)(I * H * 2));
    ck_assert_uint_eq(tc_box_rows[0], 256);
}
END_TEST

static void drop_b1_tc(moejit_moe_args *a) { a->b1 = NULL; }
static void add_b2_tc(moejit_moe_args *a) { a->b2 = dev(13); }
static void odd_b1_tc(moejit_moe_args *a) { a->b1 = (const char *)dev(12) + 1; }
static void override_2_tc(moejit_moe_args *a) { a->act_param[2] = (const float *)dev(24); }

/* b1 and b2 on the tensor-core backends: required exactly when the spec has them, handed to
 * the kernels on every path; per-expert overrides only where the spec has
 * act_overrides=per_expert, then handed over too. */
START_TEST(tensor_core_biases_and_overrides_are_checked_and_handed_to_the_kernels)
{
    static const char *const backends[] = {"backend=mma,arch=sm_80", "backend=wgmma,arch=sm_90a"};
    for (int b = 0; b < 2; b++) {
        char both[200], b1[200];
        snprintf(both, sizeof both, "%s,quant=bf16,act=swiglu,bias=both,w1_layout=interleaved", backends[b]);
        snprintf(b1, sizeof b1, "%s,quant=fp16,act=gelu,bias=b1,w1_layout=gate_up", backends[b]);
        forward_fails(both, 4, 64, 32, 16, 2, drop_b1_tc, "args.b1: must not be NULL");
        forward_fails(b1, 4, 64, 32, 16, 2, add_b2_tc, "args.b2: must be NULL: the spec has no bias b2");
        forward_fails(b1, 4, 64, 32, 16, 2, odd_b1_tc, "args.b1: must be 2-byte aligned");
        static const int64_t batches[] = {1, 5, 300, 4096}; /* decode, chain, large (and pairs) */
        for (size_t t = 0; t < sizeof batches / sizeof batches[0]; t++) {
            tc_forward(both, batches[t], 2048, 768, 128, 8, 0, 0, 0);
            ck_assert_uint_eq(tc_b1, (uintptr_t)dev(12));
            ck_assert_uint_eq(tc_b2, (uintptr_t)dev(13));
        }
        /* overrides: only in a layer whose spec asks for them, then handed over */
        forward_fails(both, 5, 2048, 768, 128, 8, override_2_tc,
                      "args.act_param[2]: must be NULL: backend ");
        ck_assert_ptr_nonnull(strstr(moejit_last_error(), "add act_overrides=per_expert to the spec"));
        char with[240];
        snprintf(with, sizeof with, "%s,act_overrides=per_expert", both);
        moejit_spec *s = spec_of(with);
        moejit_moe_args a = args_for(s, 5, 2048, 768, 128, 8);
        a.act_param[2] = (const float *)dev(24);
        size_t bytes = 0;
        ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_OK);
        mj_driver d;
        mj_module m;
        tc_setup(&d, &m);
        ck_assert_int_eq(mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, bytes, NULL, &g_knobs),
                         MOEJIT_OK);
        ck_assert_uint_eq(tc_act_param[2], (uintptr_t)dev(24));
        ck_assert_uint_eq(tc_act_param[0], 0);
        /* an index past the activation's parameters stays refused */
        char g_with[240];
        snprintf(g_with, sizeof g_with, "%s,act_overrides=per_expert", b1);
        moejit_spec *g = spec_of(g_with);
        moejit_moe_args ga = args_for(g, 5, 2048, 768, 128, 8);
        ga.act_param[0] = (const float *)dev(24);
        ck_assert_int_eq(mj_launch_workspace_size(g, &ga, &bytes), MOEJIT_OK);
        ck_assert_int_eq(mj_launch_forward(&d, g, &m, &ga, (void *)(uintptr_t)0x70000000u, bytes, NULL, &g_knobs),
                         MOEJIT_ERR_INVALID_ARGUMENT);
        ck_assert_str_eq(moejit_last_error(),
                         "args.act_param[0]: must be NULL: activation gelu has no parameters to override");
        moejit_spec_destroy(g);
        moejit_spec_destroy(s);
    }
}
END_TEST

START_TEST(wgmma_large_path_runs_short_tiles_up_to_32_rows_per_expert)
{
    /* a gated activation (WGMMA: swiglu), tile=auto at 32 rows per local expert (T = 512: 4096 pairs over 128 experts): the large
     * path in its 64-row tiles: their offsets kernel, GEMMs and shared memory; the boxes are
     * the large tiles' (BN 256: gated W1 in halves of 128 rows, W2 whole) */
    static const tc_launch_rec want[] = {{0, 64, 1, 256, 0, -1, 1},
                                         {MJ_WGMMA_K_EXPERT_OFFSETS_SHORT, 1, 1, 512, 0, -1, 1},
                                         {2, 2, 1, 256, 0, -1, 1},
                                         {MJ_WGMMA_K_GEMM1_ACT_SHORT, 132, 1, 384, MJ_WGMMA_SHORT_SMEM, 1, 1},
                                         {MJ_WGMMA_K_GEMM2_SHORT, 132, 1, 384, MJ_WGMMA_SHORT_SMEM, 2, 1},
                                         {5, 512, 4, 128, 0, -1, 1}};
    tc_forward(WGMMA, 512, 2048, 768, 128, 8, 0, 0, 0);
    expect_launches(WGMMA " (short)", want, 6);
    ck_assert_int_eq(tc_attr_smem, MJ_WGMMA_SHORT_SMEM);
    ck_assert_uint_eq(tc_box_rows[0], 128);
    ck_assert_uint_eq(tc_box_rows[1], 256);
    moejit_spec *s = spec_of(WGMMA);
    moejit_moe_args a = args_for(s, 512, 2048, 768, 128, 8);
    ck_assert(plan_of(s, &a, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO).short_tiles);
    /* 33 rows per expert: the 128-row tiles */
    a = args_for(s, 528, 2048, 768, 128, 8);
    ck_assert(!plan_of(s, &a, MJ_GEMM_PLAN_SMS_UNKNOWN, MJ_DECODE_AUTO).short_tiles);
    moejit_spec_destroy(s);
    tc_forward(WGMMA, 528, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_EXPERT_OFFSETS);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
    ck_assert_int_eq(tc_gemm(0)->smem, MJ_WGMMA_SMEM);
    /* the row tiles of 64 bound the grid: 80 pairs over 8 experts (10 rows each) make at most
     * 2 + 8 = 10 row tiles (9 of 128 rows): GEMM1 6 x 10 CTAs, GEMM2 8 x 10 */
    tc_forward(WGMMA, 40, 2048, 768, 8, 2, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_SHORT);
    ck_assert_uint_eq(tc_gemm(0)->gx, 60);
    ck_assert_uint_eq(tc_gemm(1)->gx, 80);
    /* ungated activations keep the 128-row tiles */
    tc_forward("backend=wgmma,quant=bf16,act=relu2,routing=renormalize,arch=sm_90a", 512, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_EXPERT_OFFSETS);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
    /* rows per LOCAL expert: the same 80 pairs over 2 local experts of 8 are 40 rows each */
    tc_forward(WGMMA, 40, 2048, 768, 8, 2, 0, 2, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
    /* forced tile=large takes them too; tile=tall and pair, and mma's large path, do not */
    tc_forward(WGMMA ",tile=large", 16, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_SHORT);
    tc_forward(WGMMA ",tile=pair", 512, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_PAIR);
    tc_forward(MMA ",tile=large", 512, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
}
END_TEST

START_TEST(wgmma_tall_path_takes_its_own_offsets_gemms_and_boxes)
{
    /* tile=tall: the tall kernels after the mma table, row tiles of 256, boxes of 64 (gated
     * W1 halves) and 128 (W2) rows */
    static const tc_launch_rec want[] = {{0, 512, 1, 256, 0, -1, 1},
                                         {MJ_WGMMA_K_EXPERT_OFFSETS_TALL, 1, 1, 512, 0, -1, 1},
                                         {2, 16, 1, 256, 0, -1, 1},
                                         {MJ_WGMMA_K_GEMM1_ACT_TALL, 132, 1, 384, 197888, 1, 1},
                                         {MJ_WGMMA_K_GEMM2_TALL, 132, 1, 384, 197888, 2, 1},
                                         {5, 4096, 2, 128, 0, -1, 1}};
    tc_forward(WGMMA ",tile=tall", 4096, 2048, 768, 128, 8, 0, 0, 184995840);
    expect_launches(WGMMA ",tile=tall", want, 6);
    ck_assert_uint_eq(tc_box_rows[0], 64);
    ck_assert_uint_eq(tc_box_rows[1], 128);
    tc_forward(WGMMA ",tile=tall", 300, 2048, 768, 128, 8, 0, 0, 13569024); /* forced at 19 rows */
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_TALL);
    /* the tall path's row tiles are 256 rows: max_tiles = E_local + P / 256 bounds the grid;
     * ungated: W1 in one 128-row box */
    tc_forward("backend=wgmma,quant=bf16,act=relu2,routing=renormalize,arch=sm_90a,tile=tall", 4096, 2048, 768,
               128, 8, 0, 0, 184995840);
    ck_assert_uint_eq(tc_box_rows[0], 128);
    /* mma has no tall path: refused naming the field and what mma knows */
    moejit_spec *s = spec_of(MMA ",tile=tall");
    moejit_moe_args a = args_for(s, 64, 2048, 768, 128, 8);
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_str_eq(moejit_last_error(), "tile: backend mma knows auto, large, small; got tall");
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(wgmma_pair_path_runs_clusters_of_two_over_the_large_row_tiles)
{
    /* tile=auto at 256 rows per expert: pair. Its own offsets kernel (the large path's row
     * tiles of 128, listed in the pair order below MJ_WGMMA_PAIR_ORDER_MAX_ROWS per expert), max_tiles = 256 + 128 = 384 row tiles -> 192
     * units x 6 (GEMM1) or 8 (GEMM2) column tiles, capped at the clusters the device keeps
     * resident (the fake says 66: 132 CTAs) */
    static const tc_launch_rec want[] = {{0, 512, 1, 256, 0, -1, 1},
                                         {MJ_WGMMA_K_EXPERT_OFFSETS_PAIR, 1, 1, 512, 0, -1, 1},
                                         {2, 16, 1, 256, 0, -1, 1},
                                         {MJ_WGMMA_K_GEMM1_ACT_PAIR, 132, 1, 384, 197888, 1, 1},
                                         {MJ_WGMMA_K_GEMM2_PAIR, 132, 1, 384, 197888, 2, 1},
                                         {5, 4096, 2, 128, 0, -1, 1}};
    tc_clusters = 66;
    tc_forward(WGMMA, 4096, 2048, 768, 128, 8, 0, 0, 184995840);
    expect_launches(WGMMA " (pair)", want, 6);
    ck_assert_int_eq(n_tc_cluster_queries, 2);
    /* boxes of 128 rows: the gated W1's up or gate half, and half of a W2 tile */
    ck_assert_uint_eq(tc_box_rows[0], 128);
    ck_assert_uint_eq(tc_box_rows[1], 128);
    /* from MJ_WGMMA_PAIR_ORDER_MAX_ROWS rows per expert the tiles stay in expert order: the
     * large path's offsets kernel (16384 tokens: 1024 rows per expert; 6144: 384; 6143: 383.9) */
    tc_forward(WGMMA, 16384, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_EXPERT_OFFSETS);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_PAIR);
    tc_forward(WGMMA, MJ_WGMMA_PAIR_ORDER_MAX_ROWS * 128 / 8, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_EXPERT_OFFSETS);
    tc_forward(WGMMA, MJ_WGMMA_PAIR_ORDER_MAX_ROWS * 128 / 8 - 1, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_WGMMA_K_EXPERT_OFFSETS_PAIR);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_PAIR);
    /* the grid follows the driver's answer (40 clusters: 80 CTAs), not the SM count */
    tc_clusters = 40;
    tc_forward(WGMMA ",tile=pair", 4096, 2048, 768, 128, 8, 0, 0, 184995840);
    ck_assert_uint_eq(tc_gemm(0)->gx, 80);
    ck_assert_uint_eq(tc_gemm(1)->gx, 80);
    tc_forward(WGMMA ",tile=pair", 8, 2048, 768, 128, 8, 0, 0, 0);
    /* 8 tokens: max_tiles = 1 + 64 = 65 -> 33 units; GEMM1 33 x 6 = 198 > 40, GEMM2 likewise */
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_PAIR);
    ck_assert_uint_eq(tc_gemm(0)->gx, 80);
    /* ungated W1 in boxes of 128 rows too */
    tc_clusters = 66;
    tc_forward("backend=wgmma,quant=bf16,act=relu2,routing=renormalize,arch=sm_90a,tile=pair", 4096, 2048, 768,
               128, 8, 0, 0, 184995840);
    ck_assert_uint_eq(tc_box_rows[0], 128);
    ck_assert_uint_eq(tc_box_rows[1], 128);
    /* a device that cannot keep one cluster resident: refused naming the field and the way out;
     * a failing query names the call */
    tc_clusters = 0;
    ck_assert_int_eq(qwen3_30b_forward_status(WGMMA ",tile=pair", 4096), MOEJIT_ERR_CUDA);
    ck_assert_msg(strstr(moejit_last_error(), "tile: this device cannot keep one cluster of 2 CTAs") &&
                      strstr(moejit_last_error(), "tile=large or tall"),
                  "%s", moejit_last_error());
    ck_assert_int_eq(n_tc_recs, 0); /* nothing was launched */
    tc_clusters = -1;
    ck_assert_int_eq(qwen3_30b_forward_status(WGMMA ",tile=pair", 4096), MOEJIT_ERR_CUDA);
    ck_assert_msg(strstr(moejit_last_error(), "cuOccupancyMaxActiveClusters(pair GEMM)"), "%s", moejit_last_error());
    ck_assert_int_eq(n_tc_recs, 0);
    tc_clusters = 66;
    /* mma has no pair path */
    moejit_spec *s = spec_of(MMA ",tile=pair");
    moejit_moe_args a = args_for(s, 64, 2048, 768, 128, 8);
    size_t bytes = 0;
    ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_str_eq(moejit_last_error(), "tile: backend mma knows auto, large, small; got pair");
    moejit_spec_destroy(s);
}
END_TEST

START_TEST(pdl_off_makes_every_tensor_core_launch_a_plain_one)
{
    g_knobs.pdl = MJ_PDL_OFF;
    tc_forward(WGMMA, 1, 2048, 768, 128, 8, 0, 0, 64512);
    ck_assert_int_eq(n_tc_recs, 2); /* decode: GEMM1 routes for itself, GEMM2 finalizes */
    for (int i = 0; i < n_tc_recs; i++) ck_assert_int_eq(tc_recs[i].pdl, 0);
    tc_forward(MMA, 4096, 2048, 768, 128, 8, 0, 0, 184995840);
    for (int i = 0; i < n_tc_recs; i++) ck_assert_int_eq(tc_recs[i].pdl, 0);
    g_knobs.pdl = MJ_PDL_ALL;
}
END_TEST

START_TEST(pdl_inner_launches_a_forwards_first_kernel_plainly)
{
    g_knobs.pdl = MJ_PDL_INNER;
    tc_forward(WGMMA, 1, 2048, 768, 128, 8, 0, 0, 64512); /* routed GEMM1, GEMM2 + finalize */
    ck_assert_int_eq(n_tc_recs, 2);
    ck_assert_int_eq(tc_recs[0].pdl, 0);
    ck_assert_int_eq(tc_recs[1].pdl, 1);
    tc_forward(MMA, 4096, 2048, 768, 128, 8, 0, 0, 184995840); /* after the memset: route first */
    ck_assert_int_eq(n_tc_recs, 6);
    for (int i = 0; i < n_tc_recs; i++) ck_assert_int_eq(tc_recs[i].pdl, i > 0);
    /* sm_80 has no griddepcontrol whatever the setting says */
    tc_forward("backend=mma,quant=bf16,act=swiglu,routing=renormalize,arch=sm_80", 5, 2048, 768, 128, 8, 0, 0, 0);
    for (int i = 0; i < n_tc_recs; i++) ck_assert_int_eq(tc_recs[i].pdl, 0);
    g_knobs.pdl = MJ_PDL_ALL;
}
END_TEST


START_TEST(mma_and_wgmma_workspace_sizes_are_pinned)
{
    const char *const specs[] = {MMA, WGMMA};
    for (int i = 0; i < 2; i++) {
        moejit_spec *s = spec_of(specs[i]);
        static const struct { int64_t T, H, I, E, k, off, local; size_t bytes; } cases[] = {
            {3, 4096, 14336, 8, 2, 0, 0, 961280}, /* y 8 times: the persistent layer's K splits */
            {1000, 4096, 14336, 8, 2, 2, 4, 73756160},
            {7, 512, 256, 64, 6, 32, 32, 70912},
            {0, 2048, 768, 128, 8, 0, 0, 0},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            moejit_moe_args a = args_for(s, cases[c].T, cases[c].H, cases[c].I, cases[c].E, cases[c].k);
            a.expert_offset = cases[c].off, a.num_local_experts = cases[c].local;
            size_t bytes = 1;
            ck_assert_int_eq(mj_launch_workspace_size(s, &a, &bytes), MOEJIT_OK);
            ck_assert_msg(bytes == cases[c].bytes, "%s case %zu: %zu bytes, want %zu", specs[i], c, bytes,
                          cases[c].bytes);
        }
        moejit_spec_destroy(s);
    }
}
END_TEST

/* ---- fp8 on wgmma (launch_tc_fp8.c, templates/wgmma_fp8.cuh) -------------------------------- */

#define WGMMA_FP8 "backend=wgmma,quant=fp8_block,act=swiglu,routing=renormalize,arch=sm_90a"

/* fp8 runs the wgmma GEMMs on every path, their stages' A row scales in more shared memory,
 * the weights through byte maps of 128 codes per row; never mma's 16-bit small path: decode
 * is the large path's short tiles (gated) or 128-row tiles, after the route kernel. */
START_TEST(wgmma_fp8_runs_its_gemms_on_every_path_with_byte_maps)
{
    tc_forward(WGMMA_FP8 ",tile=large", 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
    ck_assert_uint_eq(tc_gemm(0)->smem, MJ_WGMMA_FP8_SMEM);
    ck_assert_uint_eq(tc_gemm(1)->smem, MJ_WGMMA_FP8_SMEM);
    ck_assert_int_eq(tc_attr_smem, MJ_WGMMA_FP8_SMEM);
    ck_assert_int_eq(n_tc_maps, 2);
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(tc_map_type[i], CU_TENSOR_MAP_DATA_TYPE_UINT8);
        ck_assert_uint_eq(tc_box_k[i], MJ_WGMMA_FP8_BK);
    }
    ck_assert_uint_eq(tc_row_stride[0], 2048); /* W1 rows: H bytes */
    ck_assert_uint_eq(tc_row_stride[1], 768);  /* W2 rows: I bytes */
    ck_assert_uint_eq(tc_box_rows[0], 128);
    ck_assert_uint_eq(tc_box_rows[1], 256);
    /* a 16-bit layer keeps its maps */
    tc_forward(WGMMA ",tile=large", 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_map_type[0], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
    ck_assert_uint_eq(tc_box_k[0], MJ_WGMMA_BK);
    ck_assert_uint_eq(tc_row_stride[0], 2 * 2048);
    /* batch 1: route, offsets (scattering), then the short tiles' GEMMs and finalize */
    for (int pre = 0; pre < 2; pre++) {
        tc_forward(pre ? "backend=wgmma,quant=fp8_block,act=swiglu,routing=precomputed,arch=sm_90a" : WGMMA_FP8, 1,
                   2048, 768, 128, 8, 0, 0, 0);
        ck_assert_int_eq(n_tc_recs, 5);
        ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_ROUTE);
        ck_assert_int_eq(tc_recs[1].kernel, MJ_WGMMA_K_EXPERT_OFFSETS_SHORT);
        ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_SHORT);
        ck_assert_int_eq(tc_gemm(1)->kernel, MJ_WGMMA_K_GEMM2_SHORT);
        ck_assert_uint_eq(tc_gemm(0)->smem, MJ_WGMMA_FP8_SHORT_SMEM);
        ck_assert_int_eq(tc_gemm(2)->kernel, MJ_MMA_K_FINALIZE);
    }
    /* ungated fp8_tensor at 4 tokens: the 128-row tiles; tall and pair when asked */
    tc_forward("backend=wgmma,quant=fp8_tensor,fp8_act=token,act=relu2,arch=sm_90a", 4, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
    ck_assert_uint_eq(tc_gemm(0)->smem, MJ_WGMMA_FP8_SMEM);
    tc_forward(WGMMA_FP8 ",tile=tall", 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_TALL);
    ck_assert_uint_eq(tc_gemm(1)->smem, MJ_WGMMA_FP8_SMEM);
    tc_forward(WGMMA_FP8, 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_PAIR);
    ck_assert_uint_eq(tc_gemm(0)->smem, MJ_WGMMA_FP8_SMEM);
    ck_assert_uint_eq(tc_cluster_smem, MJ_WGMMA_FP8_SMEM); /* the residency query asks with the same */
    /* the plan agrees: no small path, no persistent layer, whatever T */
    moejit_spec *s = spec_of(WGMMA_FP8);
    for (int64_t T = 1; T <= 64; T *= 2) {
        moejit_moe_args a = args_for(s, T, 2048, 768, 128, 8);
        const mj_gemm_plan p = plan_of(s, &a, 132, MJ_DECODE_AUTO);
        ck_assert_int_ne(p.path, MJ_MMA_PATH_SMALL);
        ck_assert(!p.persistent_candidate && !p.persistent_splits && !p.fused_route && !p.routed_gemm1);
    }
    moejit_spec_destroy(s);
}
END_TEST

/* An fp8 wgmma forward's scales and shapes, each refusal naming the field. */
START_TEST(wgmma_fp8_arguments_are_checked_naming_the_field)
{
    const char *tensor = "backend=wgmma,quant=fp8_tensor,act=swiglu,arch=sm_90a";
    forward_fails(tensor, 2, 64, 32, 4, 2, drop_w1_scale,
                  "args.w1_scale: must not be NULL (quant=fp8_tensor: fp32 [E_local] per matrix)");
    forward_fails(WGMMA_FP8, 2, 128, 128, 4, 2, drop_w2_scale,
                  "args.w2_scale: must not be NULL (quant=fp8_block: fp32 [E_local, N/128, K/128])");
    forward_fails(WGMMA_FP8, 2, 128, 128, 4, 2, odd_w1_scale, "args.w1_scale: must be 4-byte aligned");
    forward_fails(tensor, 2, 64, 32, 4, 2, add_x_scale, "args.x_scale: must be NULL: only quant=fp8_tensor with");
    forward_fails("backend=wgmma,quant=fp8_tensor,fp8_act=static,act=swiglu,arch=sm_90a", 2, 64, 32, 4, 2,
                  drop_x_scale, "args.x_scale: must not be NULL (quant=fp8_tensor with fp8_act=static");
    forward_fails(WGMMA, 2, 64, 32, 4, 2, add_x_scale, "args.x_scale: must be NULL");
    forward_fails(WGMMA, 2, 64, 32, 4, 2, add_w1_scale, "args.w1_scale: must be NULL");
    forward_fails(tensor, 2, 72, 32, 4, 2, NULL, "args.hidden: must be a multiple of 16 for quant=fp8_tensor");
    forward_fails(tensor, 2, 64, 40, 4, 2, NULL, "args.inter: must be a multiple of 16 for quant=fp8_tensor");
    forward_fails(WGMMA_FP8, 2, 64, 128, 4, 2, NULL, "args.hidden: must be a multiple of 128");
    moejit_spec *s = spec_of(WGMMA_FP8 ",tile=small");
    moejit_moe_args a = args_for(s, 2, 128, 128, 4, 2);
    ck_assert_int_eq(forward(s, &a), MOEJIT_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(moejit_last_error(), "tile: an fp8 wgmma layer has no small path"));
    moejit_spec_destroy(s);
}
END_TEST

/* fp8_act=tensor: x's one scale needs every route block's amax, so the scatter kernel, the
 * first after all of them, quantizes x once (templates/tc_fp8_quant.cuh): it runs at every T,
 * also where the offsets kernel scatters, on enough blocks for x's rows (32 per block) and for
 * the pairs; the other activation scalings keep the scatter kernel where the pairs need it. */
START_TEST(wgmma_fp8_tensor_scatter_kernel_quantizes_x_at_every_batch)
{
    static const struct { int64_t T; unsigned blocks; } cases[] = {{1, 1}, {100, 4}, {256, 8}, {4096, 128}, {40000, 1250}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tc_forward("backend=wgmma,quant=fp8_tensor,act=swiglu,arch=sm_90a", cases[i].T, 2048, 768, 128, 8, 0, 0, 0);
        ck_assert_int_eq(n_tc_recs, 6);
        ck_assert_int_eq(tc_recs[2].kernel, MJ_MMA_K_SCATTER);
        const unsigned pair_blocks = (unsigned)((cases[i].T * 8 + MJ_SCATTER_PAIRS_PER_BLOCK - 1) / MJ_SCATTER_PAIRS_PER_BLOCK);
        ck_assert_uint_eq(tc_recs[2].gx, cases[i].blocks > pair_blocks ? cases[i].blocks : pair_blocks);
        ck_assert_uint_eq(tc_recs[2].gx, (unsigned)mj_tc_fp8_x_blocks(cases[i].T) > pair_blocks
                                              ? (unsigned)mj_tc_fp8_x_blocks(cases[i].T)
                                              : pair_blocks);
    }
    /* token and fp8_block quantize x in the route kernel: at 100 tokens the offsets kernel scatters */
    tc_forward("backend=wgmma,quant=fp8_tensor,fp8_act=token,act=swiglu,arch=sm_90a", 100, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(n_tc_recs, 5);
    tc_forward(WGMMA_FP8, 100, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(n_tc_recs, 5);
}
END_TEST

/* The bytes of n, rounded up to the workspace's region alignment. */
static size_t ws_region(size_t n) { return (n + MJ_WS_ALIGN - 1) / MJ_WS_ALIGN * MJ_WS_ALIGN; }

/* fp8 on wgmma adds its regions to the 16-bit layout of the same path (tile=large: no
 * persistent layer's K splits; launch_tc_fp8.h): fp8_block x's and the intermediate's codes
 * and 1 x 128 scales; fp8_act=token x's codes and scales and the intermediate's amax per
 * (token, slot); fp8_act=tensor x's codes (the scatter kernel's), its amax per token and its
 * scale after them, and one word; static x one word. */
START_TEST(wgmma_fp8_workspace_adds_the_quantized_activations_and_their_scales)
{
    static const struct { int64_t T, k; } shapes[] = {{1, 8}, {3, 2}, {1000, 8}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int64_t T = shapes[i].T, k = shapes[i].k, H = 2048, I = 768, E = 128;
        const size_t P = (size_t)(T * k), base = ws_of(WGMMA ",tile=large", T, H, I, E, k);
        const size_t x_amax = ws_region(4 * (size_t)T), one = ws_region(4);
        ck_assert_uint_eq(ws_of("backend=wgmma,quant=fp8_tensor,act=swiglu,arch=sm_90a", T, H, I, E, k),
                          base + ws_region((size_t)(T * H)) + ws_region(4 * (size_t)(T + 1)) + one);
        ck_assert_uint_eq(ws_of("backend=wgmma,quant=fp8_tensor,fp8_act=token,act=swiglu,arch=sm_90a", T, H, I, E, k),
                          base + ws_region((size_t)(T * H)) + x_amax + ws_region(4 * P));
        ck_assert_uint_eq(ws_of("backend=wgmma,quant=fp8_tensor,fp8_act=static,act=swiglu,arch=sm_90a", T, H, I, E, k),
                          base + one);
        ck_assert_uint_eq(ws_of(WGMMA_FP8, T, H, I, E, k), base + ws_region((size_t)(T * H)) +
                                                               ws_region(4 * (size_t)T * (size_t)(H / 128)) +
                                                               ws_region(P * (size_t)I) + ws_region(4 * P * (size_t)(I / 128)));
    }
    ck_assert_uint_eq(ws_of(WGMMA_FP8, 0, 2048, 768, 128, 8), 0);
}
END_TEST

/* A table entry for the shape (tune_table.h, installed through its test hook) decides the
 * path of tile=auto inside its bucket only, for its backend only; tile=large|small still
 * force theirs; without the table the heuristic is back. */
START_TEST(a_tuning_table_entry_flips_the_auto_path_only)
{
    static const char table[] =
        "{\"version\":1,\"entries\":[{\"backend\":\"wgmma\",\"arch\":\"sm_90a\",\"hidden\":2048,"
        "\"inter\":768,\"experts\":128,\"topk\":8,\"gated\":true,\"dtype\":\"bf16\",\"max_tokens\":64,"
        "\"path\":\"large\"},{\"backend\":\"wgmma\",\"arch\":\"sm_90a\",\"hidden\":2048,\"inter\":768,"
        "\"experts\":128,\"topk\":8,\"gated\":true,\"dtype\":\"bf16\",\"max_tokens\":4096,"
        "\"path\":\"small\"}]}";
    const char *const texts[] = {WGMMA, WGMMA ",tile=large", WGMMA ",tile=small", MMA};
    moejit_spec *sp[4];
    for (int i = 0; i < 4; i++) sp[i] = spec_of(texts[i]);
    moejit_moe_args a1 = args_for(sp[0], 1, 2048, 768, 128, 8), a4k = args_for(sp[0], 4096, 2048, 768, 128, 8);
    moejit_moe_args a5k = args_for(sp[0], 5000, 2048, 768, 128, 8);
    /* the heuristic: small at T = 1, pair at T = 4096 and 5000 (256 and more rows per expert) */
    ck_assert_int_eq(plan_path(sp[0], &a1), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(plan_path(sp[0], &a4k), MJ_MMA_PATH_PAIR);
    ck_assert_int_eq(mj_tune_table_install(table), MOEJIT_OK);
    ck_assert_int_eq(plan_path(sp[0], &a1), MJ_MMA_PATH_LARGE);  /* bucket 64 */
    ck_assert_int_eq(plan_path(sp[0], &a4k), MJ_MMA_PATH_SMALL); /* bucket 4096 */
    ck_assert_int_eq(plan_path(sp[0], &a5k), MJ_MMA_PATH_PAIR); /* above: the heuristic */
    ck_assert_int_eq(plan_path(sp[1], &a1), MJ_MMA_PATH_LARGE);
    ck_assert_int_eq(plan_path(sp[1], &a4k), MJ_MMA_PATH_LARGE);
    ck_assert_int_eq(plan_path(sp[2], &a1), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(plan_path(sp[2], &a4k), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(plan_path(sp[3], &a1), MJ_MMA_PATH_SMALL); /* the entries are wgmma's */
    ck_assert_int_eq(plan_path(sp[3], &a4k), MJ_MMA_PATH_LARGE);
    /* the forward follows: T = 1 now launches the large GEMMs (persistent, with tensor maps;
     * in the short tiles at so few rows per expert) */
    tc_forward(WGMMA, 1, 2048, 768, 128, 8, 0, 0, 64512);
    ck_assert_int_eq(n_tc_maps, 2);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_SHORT);
    ck_assert_int_eq(mj_tune_table_install(NULL), MOEJIT_OK);
    ck_assert_int_eq(plan_path(sp[0], &a1), MJ_MMA_PATH_SMALL);
    ck_assert_int_eq(plan_path(sp[0], &a4k), MJ_MMA_PATH_PAIR);
    for (int i = 0; i < 4; i++) moejit_spec_destroy(sp[i]);
}
END_TEST

/* ---- 4-bit weights on the tensor-core backends ------------------------------------------------ */

#define MMA_W4 "backend=mma,quant=w4a16,group=128,act=swiglu,routing=renormalize,arch=sm_90a"
#define MMA_W4_ZP "backend=mma,quant=w4a16,group=64,zero_point=1,act=swiglu,routing=renormalize,arch=sm_90a"
#define WGMMA_MX "backend=wgmma,quant=mxfp4,act=swiglu(alpha=1.702,beta=1,limit=7),routing=renormalize,arch=sm_90a"

static void tc_w4_refused(const char *text, const char *part)
{
    moejit_spec *s = spec_of(text);
    moejit_moe_args a = args_for(s, 2, 2880, 2880, 8, 2);
    mj_driver d;
    mj_module m;
    tc_setup(&d, &m);
    const moejit_status st = mj_launch_forward(&d, s, &m, &a, (void *)(uintptr_t)0x70000000u, 1u << 30, NULL, &g_knobs);
    ck_assert_msg(st != MOEJIT_OK && strstr(moejit_last_error(), part), "%s: %s lacks '%s'", text,
                  moejit_last_error(), part);
    ck_assert_int_eq(n_tc_recs, 0);
    moejit_spec_destroy(s);
}

START_TEST(four_bit_tensor_core_inputs_are_checked_naming_the_field)
{
    forward_fails(MMA_W4_ZP, 2, 256, 256, 4, 2, drop_w2_zero,
                  "args.w2_zero: must not be NULL (quant=w4a16 with zero_point=1: u8 [E_local, N, K/group/2])");
    forward_fails(MMA_W4, 2, 256, 256, 4, 2, drop_w1_scale,
                  "args.w1_scale: must not be NULL (quant=w4a16: dtype [E_local, N, K/group])");
    forward_fails(WGMMA_MX, 2, 2880, 2880, 4, 2, drop_w2_scale,
                  "args.w2_scale: must not be NULL (quant=mxfp4: e8m0 bytes [E_local, N, K/32])");
    forward_fails(MMA_W4, 2, 256, 256, 4, 2, odd_w2_scale_by_one, "args.w2_scale: must be 2-byte aligned");
    forward_ok(WGMMA_MX, 0, 2880, 2880, 4, 2, odd_w2_scale_by_one); /* e8m0 bytes: any address; T = 0 */
    forward_fails(MMA_W4, 2, 256, 256, 4, 2, add_w1_zero, "args.w1_zero: must be NULL");
    forward_fails(WGMMA_MX, 2, 2880, 2880, 4, 2, add_w1_zero,
                  "args.w1_zero: must be NULL: quant=mxfp4 has no zero points");
    forward_fails(MMA_W4, 2, 256, 256, 4, 2, odd_w1, "args.w1: must be 16-byte aligned");
    /* group divisibility (two groups per zero-point byte) and the 32-element chunks */
    forward_fails(MMA_W4_ZP, 2, 192, 256, 4, 2, NULL, "args.hidden: must be a multiple of 128");
    forward_fails(MMA_W4, 2, 256, 64, 4, 2, NULL, "args.inter: must be a multiple of 128");
    forward_fails(WGMMA_MX, 2, 2880, 48, 4, 2, NULL, "args.inter: must be a multiple of 32");
    /* mma has neither tall nor pair tiles, 4-bit or not */
    tc_w4_refused("backend=mma,quant=mxfp4,act=swiglu,tile=pair,arch=sm_90a",
                  "tile: backend mma knows auto, large, small; got pair");
    tc_w4_refused("backend=mma,quant=w4a16,act=swiglu,tile=tall,arch=sm_90a", "tile: backend mma knows auto, large, small");
}
END_TEST

/* The 4-bit layers launch the 16-bit chain's kernels and grids, and its persistent decode
 * layer, with their own pipelines' shared memory; never the batch-1 GEMM2 + finalize or
 * wgmma's short tiles, and its pair tiles only where the spec names them. wgmma's large, tall
 * and pair GEMMs are its persistent kernels (512 threads: two producer warpgroups, one CTA per
 * SM) with the 4-bit producer's shared memory, and no tensor maps: the producer copies the
 * packed weights itself. */
START_TEST(four_bit_forwards_run_the_chain_with_their_own_pipelines)
{
    const char *const specs[] = {MMA_W4, MMA_W4_ZP, WGMMA_MX};
    for (int i = 0; i < 3; i++) {
        tc_forward(specs[i], 1, 2048, 768, 128, 8, 0, 0, 0); /* batch 1: GEMM1's blocks route */
        ck_assert_int_eq(n_tc_recs, 3);
        ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT_SMALL_ROUTED);
        ck_assert_int_eq(tc_gemm(1)->kernel, MJ_MMA_K_GEMM2_SMALL);
        ck_assert_int_eq(tc_gemm(2)->kernel, MJ_MMA_K_FINALIZE);
        ck_assert_uint_eq(tc_gemm(0)->gx, 216); /* the 16-bit small tiles: 24 column tiles x 9 row tiles */
        ck_assert_uint_eq(tc_gemm(0)->smem, MJ_W4_SMALL_SMEM);
        ck_assert_uint_eq(tc_gemm(1)->smem, MJ_W4_SMALL_SMEM);
        ck_assert_int_eq(tc_attr_smem, MJ_W4_SMALL_SMEM);
        tc_forward(specs[i], 4, 2048, 768, 128, 8, 0, 0, 0); /* the chain, where bf16 runs the persistent layer */
        ck_assert_int_eq(n_tc_recs, 4);
        ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_ROUTE_FUSED_SMALL);
        ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT_SMALL);
        ck_assert_int_eq(tc_gemm(1)->kernel, MJ_MMA_K_GEMM2_SMALL);
        g_knobs.decode = MJ_DECODE_PERSISTENT; /* the persistent layer only when told */
        tc_forward(specs[i], 4, 2048, 768, 128, 8, 0, 0, 0);
        g_knobs.decode = MJ_DECODE_AUTO;
        ck_assert_int_eq(n_tc_recs, 2);
        ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_DECODE_RESET);
        ck_assert_int_eq(tc_recs[1].kernel, MJ_MMA_K_DECODE_PERSISTENT); /* 4-bit: the deep blocks only */
        ck_assert_uint_eq(tc_recs[1].smem, MJ_W4_DECODE_SMEM);
        /* sm_90a: four blocks of 48 KiB per SM, three with zero points (MMA_W4_ZP) */
        ck_assert_uint_eq(tc_recs[1].gx, (i == 1 ? 3 : 4) * 132);
        ck_assert_int_eq(tc_attr_smem, MJ_W4_DECODE_SMEM);
        tc_forward(specs[i], 12, 2048, 768, 128, 8, 0, 0, 0); /* the chain: fused routing, small GEMMs */
        ck_assert_int_eq(n_tc_recs, 4);
        ck_assert_int_eq(tc_recs[0].kernel, MJ_MMA_K_ROUTE_FUSED_SMALL);
        ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT_SMALL);
        ck_assert_uint_eq(tc_gemm(1)->smem, MJ_W4_SMALL_SMEM);
        /* mma: 256 rows per expert (wgmma's pair path for bf16); wgmma 128 (its 4-bit tall tiles from 256) */
        tc_forward(specs[i], i < 2 ? 4096 : 2048, 2048, 768, 128, 8, 0, 0, 0);
        ck_assert_int_eq(tc_gemm(0)->kernel, MJ_MMA_K_GEMM1_ACT);
        ck_assert_int_eq(tc_gemm(1)->kernel, MJ_MMA_K_GEMM2);
        ck_assert_int_eq(n_tc_maps, 0);
        if (i < 2) { /* mma */
            ck_assert_uint_eq(tc_gemm(0)->block, MJ_MMA_LARGE_THREADS);
            ck_assert_uint_eq(tc_gemm(0)->smem, MJ_W4_LARGE_SMEM);
            ck_assert_uint_eq(tc_gemm(0)->gx, 4608); /* the 16-bit large tiles: 12 column tiles x 384 row tiles */
            ck_assert_int_eq(tc_gemm(0)->map, -1);
        } else { /* wgmma: persistent over its 128 x 256 tiles, two producer warpgroups, the map parameter zeroed */
            for (int g = 0; g < 2; g++) {
                ck_assert_uint_eq(tc_gemm(g)->block, MJ_WGMMA_W4_THREADS);
                ck_assert_uint_eq(MJ_WGMMA_W4_THREADS, 512);
                ck_assert_uint_eq(tc_gemm(g)->smem, MJ_WGMMA_W4_SMEM);
                ck_assert_uint_eq(tc_gemm(g)->gx, 132);
                ck_assert_int_eq(tc_gemm(g)->map, 0);
            }
            ck_assert_int_eq(tc_attr_smem, MJ_WGMMA_W4_SMEM);
        }
    }
    /* wgmma's tall tiles, where the spec forces them and from 256 rows per expert: their offsets
     * and GEMMs, 256-row tiles */
    tc_forward(WGMMA_MX ",tile=tall", 2048, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_TALL);
    tc_forward(WGMMA_MX, 4096, 2048, 768, 128, 8, 0, 0, 0);
    int offsets_tall = 0;
    for (int r = 0; r < n_tc_recs; r++) offsets_tall += tc_recs[r].kernel == MJ_WGMMA_K_EXPERT_OFFSETS_TALL;
    ck_assert_int_eq(offsets_tall, 1);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_TALL);
    ck_assert_int_eq(tc_gemm(1)->kernel, MJ_WGMMA_K_GEMM2_TALL);
    for (int g = 0; g < 2; g++) {
        ck_assert_uint_eq(tc_gemm(g)->block, MJ_WGMMA_W4_THREADS);
        ck_assert_uint_eq(tc_gemm(g)->smem, MJ_WGMMA_W4_SMEM);
        ck_assert_uint_eq(tc_gemm(g)->gx, 132);
        ck_assert_int_eq(tc_gemm(g)->map, 0);
    }
    ck_assert_int_eq(n_tc_maps, 0);
    /* the pair tiles where the spec names them (tile=auto never takes them for 4-bit weights):
     * the pair offsets below MJ_WGMMA_PAIR_ORDER_MAX_ROWS rows per expert, both GEMMs in
     * clusters of two over units of two row tiles (4096 tokens: max_tiles 256 + 128 = 384 -> 192
     * units), capped at the clusters the device keeps resident for a 512-thread block of the
     * 4-bit producer's shared memory (the fake says 66) */
    tc_forward(WGMMA_MX, 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_TALL);
    tc_clusters = 66;
    tc_forward(WGMMA_MX ",tile=pair", 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_int_eq(tc_recs[1].kernel, MJ_WGMMA_K_EXPERT_OFFSETS_PAIR);
    ck_assert_int_eq(tc_gemm(0)->kernel, MJ_WGMMA_K_GEMM1_ACT_PAIR);
    ck_assert_int_eq(tc_gemm(1)->kernel, MJ_WGMMA_K_GEMM2_PAIR);
    ck_assert_int_eq(n_tc_cluster_queries, 2);
    for (int g = 0; g < 2; g++) {
        ck_assert_uint_eq(tc_gemm(g)->block, MJ_WGMMA_W4_THREADS);
        ck_assert_uint_eq(tc_gemm(g)->smem, MJ_WGMMA_W4_SMEM);
        ck_assert_uint_eq(tc_gemm(g)->gx, 132);
        ck_assert_int_eq(tc_gemm(g)->map, 0);
    }
    ck_assert_uint_eq(tc_cluster_block, MJ_WGMMA_W4_THREADS);
    ck_assert_uint_eq(tc_cluster_smem, MJ_WGMMA_W4_SMEM);
    ck_assert_int_eq(n_tc_maps, 0);
    tc_clusters = 40; /* the driver's answer bounds the grid: 80 CTAs */
    tc_forward(WGMMA_MX ",tile=pair", 4096, 2048, 768, 128, 8, 0, 0, 0);
    ck_assert_uint_eq(tc_gemm(0)->gx, 80);
    tc_clusters = 66;
}
END_TEST

static Suite *launch_suite(void)
{
    Suite *s = suite_create("launch");
    TCase *tc = tcase_create("launch");
    tcase_add_test(tc, fp8_block_needs_hidden_and_inter_multiples_of_128);
    tcase_add_test(tc, w4a16_needs_multiples_of_its_group_and_whole_zero_point_bytes);
    tcase_add_test(tc, mxfp4_needs_multiples_of_32);
    tcase_add_test(tc, missing_or_foreign_scales_are_refused_naming_the_field);
    tcase_add_test(tc, misaligned_tensors_are_refused);
    tcase_add_test(tc, biases_are_required_exactly_when_the_spec_has_them);
    tcase_add_test(tc, static_fp8_input_needs_its_scale_and_only_it_takes_one);
    tcase_add_test(tc, routing_rules_are_checked_at_launch);
    tcase_add_test(tc, activation_overrides_follow_the_activations_parameters);
    tcase_add_test(tc, fp8_workspace_holds_the_quantized_activations_and_their_scales);
    tcase_add_test(tc, forward_launches_the_fp8_stages_only_where_activations_are_quantized);
    tcase_add_test(tc, forward_hands_every_tensor_and_disjoint_workspace_regions_to_the_kernels);
    tcase_add_test(tc, amax_grid_is_capped_and_fixed_by_the_shape);
    tcase_add_test(tc, parameter_block_layout_is_pinned);
    tcase_add_test(tc, mma_decode_forward_is_one_fused_routing_launch_then_the_small_gemms);
    tcase_add_test(tc, every_routing_method_launches_what_renormalize_launches);
    tcase_add_test(tc, tensor_core_routing_arguments_are_checked_naming_the_field);
    tcase_add_test(tc, route_blocks_zero_their_own_counters_and_offsets_scatter_small_batches);
    tcase_add_test(tc, decode_gemm2_is_split_along_k_when_its_grid_is_small);
    tcase_add_test(tc, a_few_tokens_take_the_persistent_layer_when_gemm1_outnumbers_the_resident_blocks);
    tcase_add_test(tc, mma_large_forward_launches_the_tiled_gemms);
    tcase_add_test(tc, wgmma_large_forward_runs_persistent_gemms_with_their_tensor_maps);
    tcase_add_test(tc, wgmma_w1_map_follows_the_layout);
    tcase_add_test(tc, tensor_core_biases_and_overrides_are_checked_and_handed_to_the_kernels);
    tcase_add_test(tc, wgmma_large_path_runs_short_tiles_up_to_32_rows_per_expert);
    tcase_add_test(tc, wgmma_tall_path_takes_its_own_offsets_gemms_and_boxes);
    tcase_add_test(tc, wgmma_pair_path_runs_clusters_of_two_over_the_large_row_tiles);
    tcase_add_test(tc, pdl_off_makes_every_tensor_core_launch_a_plain_one);
    tcase_add_test(tc, pdl_inner_launches_a_forwards_first_kernel_plainly);
    tcase_add_test(tc, mma_and_wgmma_workspace_sizes_are_pinned);
    tcase_add_test(tc, a_tuning_table_entry_flips_the_auto_path_only);
    tcase_add_test(tc, wgmma_fp8_runs_its_gemms_on_every_path_with_byte_maps);
    tcase_add_test(tc, wgmma_fp8_arguments_are_checked_naming_the_field);
    tcase_add_test(tc, wgmma_fp8_workspace_adds_the_quantized_activations_and_their_scales);
    tcase_add_test(tc, four_bit_tensor_core_inputs_are_checked_naming_the_field);
    tcase_add_test(tc, four_bit_forwards_run_the_chain_with_their_own_pipelines);
    tcase_add_test(tc, workspace_for_a_batch_serves_every_smaller_batch);
    tcase_add_test(tc, wgmma_fp8_tensor_scatter_kernel_quantizes_x_at_every_batch);
    suite_add_tcase(s, tc);
    return s;
}

MJ_CHECK_MAIN(launch_suite)
