/*
 * bench_layer_w4.h — the 4-bit weight formats (w4a16, mxfp4) in `moejit bench layer`: the
 * device weights of a 4-bit model shape (packed nibbles, scales, zero points), the floor on the
 * bytes those weights take, and the float64 reference cases of the tensor-core backends'
 * 4-bit layers (--check --quant w4a16,mxfp4).
 */
#ifndef MJ_CLI_BENCH_LAYER_W4_H
#define MJ_CLI_BENCH_LAYER_W4_H

#include <stdint.h>
#include <stdio.h>

#include "tools/bench_floor.h"
#include "tools/bench_layer_run.h"
#include "tools/gpu_harness.h"
#include "moejit.h"

/* Whether a shape's quant field ("w4a16,group=128", "mxfp4"; NULL: bf16) is a 4-bit format. */
int bench_w4_is_4bit(const char *quant);

/* Bytes per weight element of quant in a layer of 16-bit scales: packed nibbles, scales and
 * zero points (2 for bf16). */
double bench_w4_bytes_per_weight(const char *quant);

/* The floor m (bench_floor_of, on bf16 bytes) on the bytes of quant's weights instead. */
bench_floor bench_w4_floor(bench_floor m, const char *quant, double bw, double peak);

/* A 4-bit model shape's weights on the device, every expert's. */
typedef struct bench_w4_weights {
    CUdeviceptr w1, w2, w1_scale, w2_scale, w1_zero, w2_zero;
} bench_w4_weights;

/* Allocates and fills (seeded) W1 [E, rows1, H] and W2 [E, H, I] of quant with scales (and zero
 * points) that keep the layer's values of the order of a bf16 layer's 1/sqrt(K) weights. */
moejit_status bench_w4_weights_make(const mj_gpu *g, const bench_fill *f, const char *quant, int H, int I, int E,
                                    int rows1, uint64_t seed, bench_w4_weights *w, CUstream stream);
/* Points a's weights, scales and zero points at w. */
void bench_w4_args(const bench_w4_weights *w, moejit_moe_args *a);
void bench_w4_weights_free(const mj_gpu *g, bench_w4_weights *w);

/* The float64 reference cases of backend's 4-bit layers (mma or wgmma) for the formats named
 * in quants ("w4a16": groups 32, 64, 128 with and without zero points; "mxfp4": also a NaN
 * scale), and, with either, each routing method of routings but renormalize on an mxfp4
 * layer; printed to log; g NULL: prints their layers' specs instead. Returns the number of
 * runs; *failed counts those that failed. */
int bench_w4_reference_checks(const mj_gpu *g, moejit_context *ctx, const char *backend, const char *const *quants,
                              int n_quants, const char *const *routings, int n_routings, FILE *log, int *failed);

#endif
