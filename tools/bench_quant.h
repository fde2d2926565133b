/*
 * bench_quant.h — the weight formats `moejit bench layer --quant` runs (bf16 and the fp8
 * formats of the contract), what each adds to a layer's spec, its device inputs (e4m3 weight
 * bytes, fp32 scales, a static x scale) and its float64 reference cases.
 */
#ifndef MJ_CLI_BENCH_QUANT_H
#define MJ_CLI_BENCH_QUANT_H

#include <stdint.h>
#include <stdio.h>

#include "moejit.h"
#include "tools/bench_layer_run.h"
#include "tools/gpu_harness.h"

typedef struct bench_quant {
    const char *name;  /* the --quant value */
    const char *spec;  /* its spec fields ("quant=fp8_tensor,fp8_act=token") */
    int fp8;           /* e4m3 weights with fp32 scales */
    int block;         /* fp8_block: [E, N/128, K/128] scales; else [E] per matrix */
    int static_x;      /* x arrives as e4m3 with x_scale */
    int check_h, check_i; /* the float64 cases' H and I (multiples of 128 for fp8_block, of 16 else) */
    int w4;            /* 4-bit weights: bench_layer_w4.c's float64 cases and weights */
} bench_quant;

#define BENCH_QUANT_NAMES "bf16, fp8_tensor, fp8_token, fp8_static, fp8_block, w4a16, mxfp4"

/* The format named name, or NULL. */
const bench_quant *bench_quant_find(const char *name);
/* The number of fp32 scales of an [E, N, K] weight. */
size_t bench_quant_scales(const bench_quant *q, int64_t E, int64_t N, int64_t K);

/* A shape's fp8 inputs beside its weights: the two scale arrays and the static x scale. */
typedef struct bench_quant_bufs {
    CUdeviceptr w1_scale, w2_scale, x_scale;
} bench_quant_bufs;

/* Allocates and fills q's scales for weights of E experts ([E, rows1, H] and [E, H, I]); the
 * weights' own bytes are the caller's (bench_fill_e4m3); the magnitudes make the dequantized
 * weights about 1/sqrt(K), as the 16-bit layers' fill. Nothing for bf16. */
moejit_status bench_quant_alloc(const mj_gpu *g, const bench_fill *f, const bench_quant *q, int64_t E,
                                int64_t rows1, int64_t H, int64_t I, uint64_t seed, CUstream stream,
                                bench_quant_bufs *b);
void bench_quant_free(const mj_gpu *g, bench_quant_bufs *b);
/* Points a's scales (and static x scale) at b. */
void bench_quant_args(const bench_quant *q, const bench_quant_bufs *b, moejit_moe_args *a);

/* The float64 cases of q on backend: small layers (q's check_h x check_i, 8 experts, k = 2)
 * of a gated and an ungated activation at T = 1, 5, 37, 300 (tile=auto; and T = 1, 3 on an
 * expert-parallel rank owning 4 of the 8 experts), 640 (tile=tall) and 300, 1024 (tile=pair;
 * wgmma only), with x on the e4m3 grid (each group's amax exactly 448 ·
 * 2^-6, so the kernel's quantization of x is exact) and against the float64 reference: ideal
 * (bar 0.15 of max |ref|) and the replay of the layer's rounding and quantization (0.04),
 * finite, rerun bit-identical on a poisoned workspace and after a forward with other routing.
 * routing: the spec's routing fields. ctx NULL (g NULL): prints the layers' specs instead.
 * Returns the number of failed runs and adds the runs to *runs. */
int bench_quant_reference(const mj_gpu *g, moejit_context *ctx, const char *backend, const bench_quant *q,
                          const char *routing, FILE *log, int *runs);

#endif
